import CCrashSignal
import Glibc
public import Redis

/// Leaves a note in Redis when this process dies of a crash signal (a Swift trap: overflow, a bad
/// index, `fatalError`; or a bad memory access), so ``CrashGuard`` can tell a message that crashed
/// its consumer from one whose consumer was killed or lost its connection.
///
/// The note is `SET <prefix>:crashed:<instance> "signal NN" EX 86400`, written from the signal
/// handler over a connection it opens then (only async-signal-safe calls; the address is resolved
/// and the commands are prepared here, beforehand). The signal then goes on to the Swift runtime's
/// backtracer or the default action, so the process still dies with its crash report.
public enum CrashRecorder {
    /// How long a note is kept.
    public static let retention: Duration = .seconds(86_400)

    /// The note's key for process `instance`.
    public static func key(keyPrefix: String, instance: String) -> String {
        "\(keyPrefix):crashed:\(instance)"
    }

    public enum ArmingError: Error, CustomStringConvertible {
        case unresolvable(String)
        case refused

        public var description: String {
            switch self {
            case .unresolvable(let host): "cannot resolve Redis host '\(host)' for crash notes"
            case .refused: "crash notes: the prepared commands do not fit"
            }
        }
    }

    /// Arms the handler for this process (``ProcessInstance/id``) with the Redis of `configuration`.
    public static func arm(configuration: RedisConfiguration, keyPrefix: String, instance: String = ProcessInstance.id) throws(ArmingError) {
        let (payload, signalOffset, replies) = commands(configuration: configuration, key: key(keyPrefix: keyPrefix, instance: instance))
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(configuration.endpoint.host, String(configuration.endpoint.port), &hints, &list) == 0, let first = list else {
            throw .unresolvable(configuration.endpoint.host)
        }
        defer { freeaddrinfo(list) }
        let status = payload.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { chars in
                push_crash_signal_install(
                    first.pointee.ai_addr, first.pointee.ai_addrlen, chars.baseAddress, UInt(chars.count), UInt(signalOffset), Int32(replies))
            }
        }
        guard status == 0 else { throw .refused }
    }

    /// The RESP commands the handler sends (`AUTH` and `SELECT` as the configuration asks, then the
    /// note `signal ##`), where in them the handler writes the signal number over `##`, and how many
    /// replies they get.
    static func commands(configuration: RedisConfiguration, key: String) -> (bytes: [UInt8], signalOffset: Int, replies: Int) {
        var commands: [[String]] = []
        if let password = configuration.password {
            commands.append(configuration.username.map { ["AUTH", $0, password] } ?? ["AUTH", password])
        }
        if configuration.database != 0 { commands.append(["SELECT", String(configuration.database)]) }
        commands.append(["SET", key, "signal ##", "EX", String(retention.components.seconds)])
        var bytes: [UInt8] = []
        var signalOffset = 0
        for command in commands {
            bytes.append(contentsOf: Array("*\(command.count)\r\n".utf8))
            for argument in command {
                let utf8 = Array(argument.utf8)
                bytes.append(contentsOf: Array("$\(utf8.count)\r\n".utf8))
                if argument == "signal ##" { signalOffset = bytes.count + 7 }
                bytes.append(contentsOf: utf8)
                bytes.append(contentsOf: Array("\r\n".utf8))
            }
        }
        return (bytes, signalOffset, commands.count)
    }

    /// Crashes this process the way a Swift trap does (tests of the note).
    public static func trapForTesting() -> Never {
        push_crash_signal_trap()
        fatalError("unreachable")
    }
}
