import Foundation

/// Where the tests find RabbitMQ and Redis.
///
/// `make test` starts one shared RabbitMQ and one shared Redis on loopback (`scripts/test-servers.sh`)
/// and exports their URLs; tests that need a server use them and fail loudly when they are not there.
/// Tests that restart a server start a private instance of their own with ``LocalServer``, so they
/// never disturb the suites running in parallel.
public enum TestServers {
    /// The shared RabbitMQ: `PUSH_TEST_AMQP_URL`, default `amqp://guest:guest@127.0.0.1:35672/%2f`.
    public static var amqpURL: String {
        ProcessInfo.processInfo.environment["PUSH_TEST_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:35672/%2f"
    }

    /// The shared Redis: `PUSH_TEST_REDIS_URL`, default `redis://127.0.0.1:36379/0`.
    public static var redisURL: String {
        ProcessInfo.processInfo.environment["PUSH_TEST_REDIS_URL"] ?? "redis://127.0.0.1:36379/0"
    }

    /// The package root (the folder holding `Package.swift` and `scripts/`).
    public static var packageRoot: URL {
        var url = URL(fileURLWithPath: #filePath)
        // Tests/TestSupport/TestServers.swift → package root
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url
    }

    /// A name unique to this process and call, for queues and keys a test owns.
    public static func uniqueName(_ prefix: String) -> String {
        "\(prefix).\(ProcessInfo.processInfo.processIdentifier).\(UUID().uuidString.prefix(8).lowercased())"
    }
}

/// A private RabbitMQ or Redis started through the project's scripts (`scripts/rabbitmq.sh`,
/// `scripts/redis.sh`) in its own directory under `.local/`, for tests that stop and restart a server.
public struct LocalServer: Sendable {
    public enum Kind: String, Sendable {
        case rabbitmq
        case redis
    }

    public let kind: Kind
    public let name: String
    public let port: Int

    public init(_ kind: Kind, name: String, port: Int) {
        self.kind = kind
        self.name = name
        self.port = port
    }

    /// The URL a client connects to.
    public var url: String {
        switch kind {
        case .rabbitmq: "amqp://guest:guest@127.0.0.1:\(port)/%2f"
        case .redis: "redis://127.0.0.1:\(port)/0"
        }
    }

    /// Starts the server and returns once it accepts clients.
    public func start() async throws { try await script("start") }

    /// Stops the server (by PID) and returns once it has exited.
    public func stop() async throws { try await script("stop") }

    /// Stops and starts the server again, keeping its data directory.
    public func restart() async throws { try await script("restart") }

    /// Runs `scripts/<kind>.sh VERB --name N --port P` on a thread of its own (a restart takes
    /// seconds; Swift concurrency's few threads stay free for the test's other tasks).
    ///
    /// Not through Foundation's `Process`, which on Linux hangs here twice over: the child inherits the
    /// calling thread's signal mask (the threads async tests run on block SIGTERM, so the server it
    /// starts would ignore `stop`), and `Process` notices the exit through a descriptor the child
    /// inherits, which the daemonised server keeps open. So: posix_spawn with an empty signal mask and
    /// default dispositions, every descriptor above 2 closed, output to a file, and waitpid.
    private func script(_ verb: String) async throws {
        let path = TestServers.packageRoot.appendingPathComponent("scripts/\(kind.rawValue).sh").path
        let command = [
            "/bin/bash", "-c",
            #"for fd in /proc/$$/fd/*; do n=${fd##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done; exec /bin/bash "$0" "$@""#,
            path, verb, "--name", name, "--port", String(port),
        ]
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("local-server-\(kind.rawValue)-\(name)-\(UUID().uuidString).log").path
        defer { unlink(output) }
        let status = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
            Thread { continuation.resume(with: Result { try Self.spawnAndWait(command, output: output) }) }.start()
        }
        guard status == 0 else {
            throw LocalServerError(
                command: "\(path) \(verb) --name \(name) --port \(port)",
                status: status,
                output: (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            )
        }
    }

    private static func spawnAndWait(_ command: [String], output: String) throws -> Int32 {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)

        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, &attributes, &argv, environ)
        guard spawned == 0 else {
            throw LocalServerError(command: command.joined(separator: " "), status: -1, output: String(cString: strerror(spawned)))
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { break }
        }
        // WIFEXITED / WEXITSTATUS are macros: exited normally when the low 7 bits are 0.
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }
}

public struct LocalServerError: Error, CustomStringConvertible {
    public let command: String
    public let status: Int32
    public let output: String
    public var description: String { "\(command) exited with \(status):\n\(output)" }
}
