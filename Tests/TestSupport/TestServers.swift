import Foundation

/// Where the tests find RabbitMQ and Redis.
///
/// `make test` starts one shared RabbitMQ and one shared Redis on loopback (`scripts/test-servers.sh`)
/// and exports their URLs; tests that need a server use them and fail loudly when they are not there.
/// Tests that restart a server start a private instance of their own with ``LocalServer``, so they
/// never disturb the suites running in parallel.
public enum TestServers {
    /// The shared RabbitMQ: `PUSH_TEST_AMQP_URL`, default `amqp://guest:guest@127.0.0.1:5712/%2f`.
    public static var amqpURL: String {
        ProcessInfo.processInfo.environment["PUSH_TEST_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5712/%2f"
    }

    /// The shared RabbitMQ as a ``LocalServer`` (`scripts/rabbitmq.sh --name test`), for
    /// ``LocalServer/closeConnections(matching:)``. Never restart it: other suites use it.
    public static var sharedBroker: LocalServer {
        LocalServer(.rabbitmq, name: "test", port: URLComponents(string: amqpURL)?.port ?? 5712)
    }

    /// The shared RabbitMQ's TLS listener, trusting its CA and presenting the client certificate the
    /// listener requires: `PUSH_TEST_AMQPS_URL`, default `amqps://guest:guest@localhost:5711/%2f?
    /// cacertfile=<tlsDirectory>/ca.pem&certfile=<tlsDirectory>/client.pem&keyfile=<tlsDirectory>/client.key`.
    /// The host is `localhost` because the server certificate names no IP address.
    public static var amqpsURL: String {
        ProcessInfo.processInfo.environment["PUSH_TEST_AMQPS_URL"]
            ?? "amqps://guest:guest@localhost:5711/%2f?cacertfile=\(tlsDirectory)/ca.pem&certfile=\(tlsDirectory)/client.pem&keyfile=\(tlsDirectory)/client.key"
    }

    /// The shared RabbitMQ's certificates (`ca.pem`, `server.pem`, `client.pem` + `client.key`, all
    /// from one CA): `PUSH_TEST_TLS_DIR`, default `<package root>/.local/rabbitmq-test/tls`.
    public static var tlsDirectory: String {
        ProcessInfo.processInfo.environment["PUSH_TEST_TLS_DIR"]
            ?? packageRoot.appendingPathComponent(".local/rabbitmq-test/tls").path
    }

    /// The shared Redis: `PUSH_TEST_REDIS_URL`, default `redis://127.0.0.1:6419/0`.
    public static var redisURL: String {
        ProcessInfo.processInfo.environment["PUSH_TEST_REDIS_URL"] ?? "redis://127.0.0.1:6419/0"
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

    /// Runs `scripts/<kind>.sh VERB --name N --port P` as a ``ChildProcess`` (not Foundation's
    /// `Process`, which hangs on the daemonised server) and waits for it on a thread of its own, so
    /// Swift concurrency's few threads stay free for the test's other tasks.
    @discardableResult
    private func script(_ verb: String, _ extra: [String] = []) async throws -> String {
        let path = TestServers.packageRoot.appendingPathComponent("scripts/\(kind.rawValue).sh").path
        let arguments = [verb, "--name", name, "--port", String(port)] + extra
        let child = try ChildProcess(["/bin/bash", path] + arguments)
        let status = await child.waitForExit()
        guard status == 0 else {
            throw LocalServerError(command: "\(path) \(arguments.joined(separator: " "))", status: status, output: child.output)
        }
        return child.output
    }

    /// RabbitMQ: `rabbitmqctl ARGUMENTS` against this node (`scripts/rabbitmq.sh ctl`); its output.
    public func rabbitmqctl(_ arguments: [String]) async throws -> String {
        try await script("ctl", ["--"] + arguments)
    }

    /// RabbitMQ: the broker closes every client connection whose name contains `text`, as an
    /// operator's `rabbitmqctl close_connection` would; returns how many it closed.
    public func closeConnections(matching text: String) async throws -> Int {
        let output = try await script("close-connections", ["--matching", text])
        guard let count = output.split(whereSeparator: \.isNewline).last.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) else {
            throw LocalServerError(command: "close-connections --matching \(text)", status: 0, output: output)
        }
        return count
    }
}

public struct LocalServerError: Error, CustomStringConvertible {
    public let command: String
    public let status: Int32
    public let output: String
    public var description: String { "\(command) exited with \(status):\n\(output)" }
}

/// A private cluster of local servers started through the project's scripts
/// (`scripts/rabbitmq-cluster.sh`, `scripts/redis-cluster.sh`), for tests that kill a node.
public struct LocalCluster: Sendable {
    public enum Kind: String, Sendable {
        case rabbitmq = "rabbitmq-cluster"
        case redis = "redis-cluster"
    }

    public let kind: Kind
    public let name: String
    public let port: Int

    public init(_ kind: Kind, name: String, port: Int) {
        self.kind = kind
        self.name = name
        self.port = port
    }

    /// Starts every node (idempotent) and returns once the cluster is whole.
    public func start() async throws { try await script("start", ["--port", String(port)]) }

    /// Stops every node.
    public func stop() async throws { try await script("stop") }

    /// The URL listing every node (`url` verb).
    public func url() async throws -> String {
        try await script("url").split(whereSeparator: \.isNewline).last.map(String.init) ?? ""
    }

    /// SIGKILL of node `index` (1-based); its data stays.
    public func killNode(_ index: Int) async throws { try await script("kill-node", [String(index)]) }

    /// Starts node `index` again; it rejoins the cluster.
    public func startNode(_ index: Int) async throws { try await script("start-node", [String(index)]) }

    /// Runs `scripts/<kind>.sh VERB --name N ARGS` and returns its output.
    @discardableResult
    public func script(_ verb: String, _ extra: [String] = []) async throws -> String {
        let path = TestServers.packageRoot.appendingPathComponent("scripts/\(kind.rawValue).sh").path
        let arguments = [verb] + extra + ["--name", name]
        let child = try ChildProcess(["/bin/bash", path] + arguments)
        let status = await child.waitForExit()
        guard status == 0 else {
            throw LocalServerError(command: "\(path) \(arguments.joined(separator: " "))", status: status, output: child.output)
        }
        return child.output
    }
}
