import Logging
import ServiceLifecycle
import Synchronization

/// A small pool of ``RedisConnection``s used round-robin: the type services hold.
///
/// One connection already pipelines its concurrent callers, so the pool is for using more than one
/// core on reply conversion and for not stalling everything behind one big pipeline; the default is 2
/// (`pool_size` in the URL). As a ``Service``, ``run()`` waits for graceful shutdown and then closes the
/// connections, so put the client in the executable's `ServiceGroup` after the services that use it.
public final class RedisClient: RedisCommandExecutor, Service {
    public let configuration: RedisConfiguration
    private let connections: [RedisConnection]
    private let next = Atomic<Int>(0)

    /// Creates the connections, which connect in the background; commands wait for them up to their
    /// timeout. Use ``connect(configuration:logger:)`` to fail fast on a wrong address or password.
    public convenience init(configuration: RedisConfiguration, logger: Logger) {
        let connections = (0..<max(1, configuration.poolSize)).map { index in
            RedisConnection(configuration: configuration, logger: logger, name: "redis-\(index)")
        }
        self.init(configuration: configuration, connections: connections)
    }

    private init(configuration: RedisConfiguration, connections: [RedisConnection]) {
        self.configuration = configuration
        self.connections = connections
    }

    /// Opens every connection and returns once all are ready, or throws the first failure
    /// (``RedisError/Code/connectionFailed``, ``RedisError/Code/authenticationFailed``) after closing
    /// the others.
    public static func connect(configuration: RedisConfiguration, logger: Logger) async throws(RedisError) -> RedisClient {
        let count = max(1, configuration.poolSize)
        let results = await withTaskGroup(of: (Int, Result<RedisConnection, RedisError>).self) { group in
            for index in 0..<count {
                group.addTask {
                    do throws(RedisError) {
                        let connection = try await RedisConnection.connect(
                            configuration: configuration, logger: logger, name: "redis-\(index)")
                        return (index, .success(connection))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var results: [(Int, Result<RedisConnection, RedisError>)] = []
            for await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }.map(\.1)
        }
        var connections: [RedisConnection] = []
        var firstError: RedisError?
        for result in results {
            switch result {
            case .success(let connection): connections.append(connection)
            case .failure(let error): firstError = firstError ?? error
            }
        }
        if let firstError {
            for connection in connections { await connection.close() }
            throw firstError
        }
        return RedisClient(configuration: configuration, connections: connections)
    }

    /// Whether every connection is up (for readiness checks).
    public var isConnected: Bool {
        connections.allSatisfy(\.isConnected)
    }

    public func send(_ command: RedisCommand) async throws(RedisError) -> RedisReply {
        try await nextConnection().send(command)
    }

    public func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisReply] {
        try await nextConnection().pipeline(commands)
    }

    /// Closes every connection (draining queued commands) and joins their threads.
    public func close() async {
        for connection in connections { await connection.close() }
    }

    /// Waits for graceful shutdown (or cancellation), then closes the connections.
    public func run() async throws {
        try? await gracefulShutdown()
        await close()
    }

    private func nextConnection() -> RedisConnection {
        let index = next.add(1, ordering: .relaxed).oldValue
        return connections[Int(UInt(bitPattern: index) % UInt(connections.count))]
    }
}
