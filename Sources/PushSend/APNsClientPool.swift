import Metrics
public import PushCore
public import ServiceLifecycle
import Synchronization

/// One APNs client per (app, environment), made on first use: each has its own connections and
/// credentials, so one app's trouble (bad key, GOAWAYs) never touches another's.
///
/// As a ``ServiceLifecycle/Service`` it samples the open connections into a metric every second and,
/// at graceful shutdown, shuts every client down. Put it before the consumer in the service list so
/// the consumer drains first.
public final class APNsClientPool: Service, Sendable {
    /// Makes the client for an app and environment; throws when the credentials or endpoint are unusable.
    public typealias Factory = @Sendable (_ app: AppConfiguration, _ environment: AppConfiguration.Environment) throws -> any NotificationSending

    private struct Key: Hashable {
        let app: String
        let environment: AppConfiguration.Environment
    }

    private let factory: Factory
    private let clients = Mutex<[Key: any NotificationSending]>([:])
    let metrics: SendMetrics

    public convenience init(factory: @escaping Factory) {
        self.init(factory: factory, metrics: SendMetrics())
    }

    init(factory: @escaping Factory, metrics: SendMetrics) {
        self.factory = factory
        self.metrics = metrics
    }

    /// The client of `app` for devices of `environment`, made now if it is the first use.
    public func client(app: AppConfiguration, environment: AppConfiguration.Environment) throws -> any NotificationSending {
        let key = Key(app: app.bundleID, environment: environment)
        if let client = clients.withLock({ $0[key] }) {
            return client
        }
        // Made outside the lock (reading a key file); if two callers race, the first one stored wins
        // and the other's client is shut down unused.
        let made = try factory(app, environment)
        let (client, isNew) = clients.withLock { clients -> (any NotificationSending, Bool) in
            if let existing = clients[key] { return (existing, false) }
            clients[key] = made
            return (made, true)
        }
        if !isNew {
            Task { await made.shutdown() }
        }
        return client
    }

    /// Connections open now, across every client.
    public var openConnections: Int {
        clients.withLock { Array($0.values) }.reduce(0) { $0 + $1.openConnections }
    }

    /// Samples ``openConnections`` every second until graceful shutdown, then shuts every client down.
    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                self.metrics.openConnections.record(self.openConnections)
                try? await Task.sleep(for: .seconds(1))
            }
        }
        await shutdown()
    }

    /// Shuts every client down (queued requests fail with `shutdown`, in-flight ones finish, bounded).
    public func shutdown() async {
        let all = clients.withLock { clients in
            defer { clients.removeAll() }
            return Array(clients.values)
        }
        await withTaskGroup(of: Void.self) { group in
            for client in all {
                group.addTask { await client.shutdown() }
            }
        }
        metrics.openConnections.record(0)
    }
}
