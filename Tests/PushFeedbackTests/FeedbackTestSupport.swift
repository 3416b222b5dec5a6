import AMQP
import Foundation
import PushCore
import PushFeedback
import PushServiceKit
import Redis
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing
import TokenRegistry

/// A fresh push topology (own queue prefix), Redis key prefix and app per test, against the shared
/// test RabbitMQ and Redis (`TestServers`); fails when either is missing. `events` is a queue of the
/// test's own bound to `token.removed` on the events exchange, to read what push-feedback announced.
struct FeedbackFixture: Sendable {
    let names: PushQueues
    let app: String
    let apps: AppsFile
    let amqp: AMQPConnection
    let redis: RedisClient
    let registry: TokenRegistry
    /// The Redis the registry lives on (another than `redis` in outage tests), and its key prefix.
    let registryRedis: RedisClient
    let keyPrefix: String
    /// The app's registry keys in every shard.
    let keys: RegistrySets
    let events: String
    let metrics = FeedbackMetrics()

    static let logger = TestLogger.make("feedback-tests")

    func token(_ seed: Int, prefix: String = "f00dcafe") -> DeviceToken {
        TestTokens.numbered(seed, prefix: prefix)
    }

    /// Registers `token` at `at` (ms), as push-ingest would.
    @discardableResult
    func register(_ token: DeviceToken, user: String? = nil, topics: [String] = [], at: Int64) async throws -> DeviceRecord {
        try await registry.upsert(
            app: app,
            token: token,
            registration: DeviceRegistration(user: user, topics: topics),
            defaultEnvironment: .production,
            now: at
        ).record
    }

    func remover(noteLifetime: Duration = .seconds(3600)) -> TokenRemover {
        TokenRemover(registry: registry, amqp: amqp, queues: names, noteLifetime: noteLifetime, metrics: metrics)
    }

    func feedbackBody(_ token: DeviceToken, reason: String = "Unregistered", timestamp: Int64?, reportedAt: Int64 = 9_000) -> String {
        let event = FeedbackEvent(app: app, token: token.hex, reason: reason, timestamp: timestamp, reportedAt: reportedAt)
        return String(decoding: try! JSONEncoder().encode(event), as: UTF8.self)
    }

    func publishFeedback(_ body: String, headers: AMQPTable = [:], messageID: String? = nil) async throws {
        try await amqp.publish(
            AMQPOutboundMessage(
                exchange: names.exchange,
                routingKey: names.feedback.routingKey,
                body: Array(body.utf8),
                properties: AMQPProperties(headers: headers, messageID: messageID)
            )
        )
    }

    /// Runs push-feedback as the executable wires it (``buildPushFeedback``: the consumer, and the
    /// sweeper, idle with `staleDays` 0) while `body` runs, then shuts it down gracefully and waits for
    /// it to return (failing the test if it takes more than 15 s).
    func runConsumer(
        configuration: FeedbackConfiguration = FeedbackConfiguration(batchSize: 50, batchesInFlight: 3), _ body: (ServiceGroup) async throws -> Void
    ) async throws {
        let dependencies = ServiceDependencies(
            amqp: amqp, redis: registryRedis, queues: names, keyPrefix: keyPrefix, logger: Self.logger, now: { 50_000 })
        let services = buildPushFeedback(dependencies, configuration: configuration, apps: apps, metrics: metrics)
        try await withRunningServices(services, logger: Self.logger, shutdownWithin: .seconds(15), body)
    }

    func record(_ token: DeviceToken) async throws -> DeviceRecord? {
        try await registry.record(app: app, token: token)
    }

    func members(_ key: String) async throws -> [String] {
        try await redis.execute("SMEMBERS", key).array?.compactMap(\.string).sorted() ?? []
    }

    /// The members of a registry set in every shard, sorted.
    func members(_ set: RegistrySet) async throws -> [String] {
        try await redis.members(set)
    }

    func depth(_ queue: String) async throws -> Int {
        try await amqp.queueStatus(queue).messages
    }

    /// Takes `count` messages off `queue` (acking them), or fails after 10 s.
    func receive(from queue: String, count: Int) async throws -> [AMQPDelivery] {
        try await amqp.receive(from: queue, count: count, timeout: .seconds(10))
    }

    /// The `token.removed` events that reached ``events``, decoded; waits until `count` arrived.
    func removedEvents(count: Int) async throws -> [PushEvent] {
        try await receive(from: events, count: count).map { try JSONDecoder().decode(PushEvent.self, from: Data($0.body)) }
    }
}

/// Declares a fresh topology, an events queue and an app, runs `body`, then removes queues and keys.
func withFeedbackFixture(_ name: String, registryRedis: RedisClient? = nil, _ body: (FeedbackFixture) async throws -> Void) async throws {
    let names = PushQueues(prefix: TestServers.uniqueName("feedback-\(name)"))
    let app = TestServers.uniqueName("com.test.feedback-\(name)")
    let keyPrefix = TestServers.uniqueName("fbtest")
    let apps = try AppsFile(apps: [.test(app, environment: .production)])
    let events = "\(names.prefix).test-events"
    var topology = AMQPTopology.push(names)
    topology.queues.append(AMQPTopology.Queue(name: events))
    topology.bindings.append(AMQPTopology.Binding(queue: events, exchange: names.eventsExchange, routingKey: "token.removed"))
    let amqp = AMQPConnection(
        configuration: try AMQPConfiguration(url: TestServers.amqpURL, connectionName: "feedback-tests"),
        topology: topology,
        logger: FeedbackFixture.logger
    )
    let redis = try await TestServers.connectRedis(logger: FeedbackFixture.logger)
    let registry = TokenRegistry(redis: registryRedis ?? redis, keyPrefix: keyPrefix)
    let fixture = FeedbackFixture(
        names: names,
        app: app,
        apps: apps,
        amqp: amqp,
        redis: redis,
        registry: registry,
        registryRedis: registryRedis ?? redis,
        keyPrefix: keyPrefix,
        // Read with the working client: the registry's may be one to a Redis that is down.
        keys: try await RegistrySets(registry: TokenRegistry(redis: redis, keyPrefix: keyPrefix), app: app),
        events: events
    )
    try await withCleanUp {
        try await amqp.waitUntilConnected(timeout: .seconds(15))
        try await body(fixture)
    } cleanUp: {
        for queue in names.allQueueNames + [events] { _ = try? await amqp.deleteQueue(queue) }
        await amqp.close()
        try await redis.deleteKeys(matching: "\(keyPrefix):*")
        await redis.close()
    }
}
