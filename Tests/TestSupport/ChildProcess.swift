import Foundation

/// A child process for tests: spawned with posix_spawn, an empty signal mask and default signal
/// dispositions, every descriptor above 2 closed, stdin from /dev/null and output to a file.
///
/// Not Foundation's `Process`: on Linux its children inherit the calling thread's signal mask (the
/// threads async tests run on block SIGTERM, so a child would ignore it) and it notices an exit
/// through a descriptor that daemonised grandchildren keep open.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    /// Where stdout and stderr go.
    public let outputPath: String
    private let lock = NSLock()
    private var exitStatus: Int32?

    /// Starts `arguments[0]` (an absolute path) with `arguments`, and `environment` added to (or
    /// replacing keys of) this process's environment.
    public init(_ arguments: [String], environment: [String: String] = [:]) throws {
        outputPath =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("child-\(URL(fileURLWithPath: arguments[0]).lastPathComponent)-\(UUID().uuidString).log").path
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGCHLD, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // posix_spawn has no "close everything else": run through bash, which closes fds > 2 first.
        let command =
            [
                "/bin/bash", "-c",
                #"for fd in /proc/$$/fd/*; do n=${fd##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done; exec "$0" "$@""#,
            ] + arguments
        var merged = ProcessInfo.processInfo.environment
        merged.merge(environment) { $1 }
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, &attributes, &argv, &envp)
        guard spawned == 0 else {
            throw ChildProcessError("cannot start \(arguments[0]): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
    }

    deinit {
        if status == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        unlink(outputPath)
    }

    /// Everything the child wrote so far.
    public var output: String {
        (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }

    public func signal(_ signal: Int32) {
        kill(pid, signal)
    }

    /// The exit code (128 + signal for a killed child) once the child has exited, else nil.
    public var status: Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let exitStatus { return exitStatus }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
        // WIFEXITED / WEXITSTATUS are macros: exited normally when the low 7 bits are 0.
        exitStatus = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
        return exitStatus
    }

    /// Waits up to `timeout` for the child to exit; returns its exit code, or nil if it still runs.
    public func waitForExit(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status { return status }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return status
    }

    /// Waits without a bound, on a thread of its own (for scripts that end by themselves).
    public func waitForExit() async -> Int32 {
        if let status { return status }
        return await withCheckedContinuation { continuation in
            Thread {
                var raw: Int32 = 0
                while waitpid(self.pid, &raw, 0) == -1, errno == EINTR {}
                self.lock.lock()
                let code = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
                self.exitStatus = self.exitStatus ?? code
                self.lock.unlock()
                continuation.resume(returning: code)
            }.start()
        }
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension TestServers {
    /// The directory holding the package's built executables (next to the test bundle).
    public static var productsDirectory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago.
    public static func freePort() -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
