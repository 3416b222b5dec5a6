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
    public func start() throws { try script("start") }

    /// Stops the server (by PID) and returns once it has exited.
    public func stop() throws { try script("stop") }

    /// Stops and starts the server again, keeping its data directory.
    public func restart() throws { try script("restart") }

    /// Runs the script with posix_spawn and waitpid: Foundation's `Process.waitUntilExit` was seen
    /// to miss the exit of a script whose children outlive it (the server it daemonises).
    private func script(_ verb: String) throws {
        let path = TestServers.packageRoot.appendingPathComponent("scripts/\(kind.rawValue).sh").path
        let arguments = ["/bin/bash", path, verb, "--name", name, "--port", String(port)]
        let outputPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("local-server-\(kind.rawValue)-\(name)-\(UUID().uuidString).log").path
        defer { unlink(outputPath) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)

        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw LocalServerError(command: arguments.joined(separator: " "), status: -1, output: String(cString: strerror(spawned)))
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exitCode == 0 else {
            let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw LocalServerError(command: arguments.joined(separator: " "), status: exitCode, output: output)
        }
    }
}

/// Runs blocking work (a server restart) on its own thread, so it does not hold one of the few
/// threads Swift concurrency runs tasks on while other tasks of the test keep going.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

public struct LocalServerError: Error, CustomStringConvertible {
    public let command: String
    public let status: Int32
    public let output: String
    public var description: String { "\(command) exited with \(status):\n\(output)" }
}
