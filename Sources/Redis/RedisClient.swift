import Logging
import ServiceLifecycle
import Synchronization

/// A small pool of ``RedisConnection``s used round-robin: the type services hold.
///
/// One connection already pipelines its concurrent callers, so the pool is for using more than one
/// core on reply conversion and for not stalling everything behind one big pipeline; the default is 2
/// (`pool_size` in the URL). As a ``Service``, ``run()`` waits for graceful shutdown and then closes the
/// connections, so put the client in the executable's `ServiceGroup` after the services that use it.
///
/// For a Redis Cluster (``RedisConfiguration/isCluster``, `redis+cluster://`), the client routes each
/// command to the master of its key's slot, with a pool per master (see ``RedisClusterRouter``);
/// callers see the same API.
public final class RedisClient: RedisCommandExecutor, Service {
    public let configuration: RedisConfiguration

    /// False for a Redis Cluster.
    public var keysShareOneNode: Bool { !configuration.isCluster }
    private let connections: [RedisConnection]
    private let next = Atomic<Int>(0)
    private let cluster: RedisClusterRouter?

    /// Creates the connections, which connect in the background; commands wait for them up to their
    /// timeout. Use ``connect(configuration:logger:)`` to fail fast on a wrong address or password.
    public convenience init(configuration: RedisConfiguration, logger: Logger) {
        if configuration.isCluster {
            let router = RedisClusterRouter(configuration: configuration, logger: logger)
            Task { await router.refreshMap(force: true) }
            self.init(configuration: configuration, connections: [], cluster: router)
            return
        }
        let connections = (0..<max(1, configuration.poolSize)).map { index in
            RedisConnection(configuration: configuration, logger: logger, name: "redis-\(index)")
        }
        self.init(configuration: configuration, connections: connections, cluster: nil)
    }

    private init(configuration: RedisConfiguration, connections: [RedisConnection], cluster: RedisClusterRouter?) {
        self.configuration = configuration
        self.connections = connections
        self.cluster = cluster
    }

    /// Opens every connection and returns once all are ready, or throws the first failure
    /// (``RedisError/Code/connectionFailed``, ``RedisError/Code/authenticationFailed``) after closing
    /// the others.
    public static func connect(configuration: RedisConfiguration, logger: Logger) async throws(RedisError) -> RedisClient {
        if configuration.isCluster {
            let router = RedisClusterRouter(configuration: configuration, logger: logger)
            do throws(RedisError) {
                try await router.connect()
            } catch {
                await router.close()
                throw error
            }
            return RedisClient(configuration: configuration, connections: [], cluster: router)
        }
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
        return RedisClient(configuration: configuration, connections: connections, cluster: nil)
    }

    /// Whether every connection is up (for readiness checks).
    public var isConnected: Bool {
        if let cluster { return cluster.isConnected }
        return connections.allSatisfy(\.isConnected)
    }

    /// For a Redis Cluster: each master and the number of slots it serves, as the client's map says
    /// now; empty for a single server.
    public var clusterSlotsPerMaster: [RedisEndpoint: Int] { cluster?.slotsPerMaster ?? [:] }

    /// The server that holds `key`: the single server, or the Redis Cluster master serving its slot
    /// as the client's map says now (nil while the map is not known yet).
    public func server(forKey key: String) -> RedisEndpoint? {
        guard let cluster else { return configuration.endpoint }
        return cluster.master(forKey: key)
    }

    public func send(_ command: RedisCommand) async throws(RedisError) -> RedisReply {
        if let cluster { return try await cluster.send(command) }
        return try await nextConnection().send(command)
    }

    public func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisReply] {
        if let cluster { return try await cluster.pipeline(commands) }
        return try await nextConnection().pipeline(commands)
    }

    /// Closes every connection (draining queued commands) and joins their threads.
    public func close() async {
        await cluster?.close()
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
