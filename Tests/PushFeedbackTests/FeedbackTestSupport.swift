import AMQP
import Foundation
import Logging
import PushCore
import PushFeedback
import PushServiceKit
import Redis
import ServiceLifecycle
import Synchronization
import Testing
import TestSupport
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
    let keys: RegistryKeys
    let events: String
    let metrics = FeedbackMetrics()

    static let logger: Logger = {
        if ProcessInfo.processInfo.environment["PUSH_TEST_LOG"] != nil {
            var logger = Logger(label: "feedback-tests")
            logger.logLevel = .debug
            return logger
        }
        return Logger(label: "feedback-tests", factory: { _ in SwiftLogNoOpLogHandler() })
    }()

    func token(_ seed: Int, prefix: String = "f00dcafe") -> DeviceToken {
        let tail = String(seed, radix: 16)
        return try! DeviceToken(normalizing: prefix + String(repeating: "0", count: 64 - prefix.count - tail.count) + tail)
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

    /// Runs a consumer in a service group while `body` runs, then shuts it down gracefully and waits
    /// for it to return (failing the test if it takes more than 15 s).
    func runConsumer(configuration: FeedbackConfiguration = FeedbackConfiguration(batchSize: 50, batchesInFlight: 3), _ body: (ServiceGroup) async throws -> Void) async throws {
        let consumer = FeedbackQueueConsumer(
            amqp: amqp,
            registry: registry,
            apps: apps,
            queues: names,
            configuration: configuration,
            metrics: metrics,
            logger: Self.logger,
            now: { 50_000 }
        )
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [consumer], gracefulShutdownSignals: [], logger: Self.logger))
        let running = Task { try await group.run() }
        do {
            try await body(group)
        } catch {
            await group.triggerGracefulShutdown()
            _ = await running.result
            throw error
        }
        await group.triggerGracefulShutdown()
        let started = ContinuousClock.now
        try await running.value
        #expect(ContinuousClock.now - started < .seconds(15), "the consumer took \(ContinuousClock.now - started) to stop")
    }

    func record(_ token: DeviceToken) async throws -> DeviceRecord? {
        try await registry.record(app: app, token: token)
    }

    func members(_ key: String) async throws -> [String] {
        try await redis.execute("SMEMBERS", key).array?.compactMap(\.string).sorted() ?? []
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

struct FeedbackTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Declares a fresh topology, an events queue and an app, runs `body`, then removes queues and keys.
func withFeedbackFixture(_ name: String, registryRedis: RedisClient? = nil, _ body: (FeedbackFixture) async throws -> Void) async throws {
    let names = PushQueues(prefix: TestServers.uniqueName("feedback-\(name)"))
    let app = TestServers.uniqueName("com.test.feedback-\(name)")
    let keyPrefix = TestServers.uniqueName("fbtest")
    let apps = try AppsFile(apps: [
        AppConfiguration(
            bundleID: app,
            environment: .production,
            apns: .token(AppConfiguration.TokenKey(keyFile: "key.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        )
    ])
    let events = "\(names.prefix).test-events"
    var topology = AMQPTopology.push(names)
    topology.queues.append(AMQPTopology.Queue(name: events))
    topology.bindings.append(AMQPTopology.Binding(queue: events, exchange: names.eventsExchange, routingKey: "token.removed"))
    let amqp = AMQPConnection(
        configuration: try AMQPConfiguration(url: TestServers.amqpURL, connectionName: "feedback-tests"),
        topology: topology,
        logger: FeedbackFixture.logger
    )
    let redis = try await RedisClient.connect(
        configuration: RedisConfiguration(url: TestServers.redisURL, source: "PUSH_TEST_REDIS_URL"),
        logger: FeedbackFixture.logger
    )
    let registry = TokenRegistry(redis: registryRedis ?? redis, keyPrefix: keyPrefix)
    let fixture = FeedbackFixture(
        names: names,
        app: app,
        apps: apps,
        amqp: amqp,
        redis: redis,
        registry: registry,
        keys: registry.keys(app: app),
        events: events
    )
    var failure: (any Error)?
    do {
        try await amqp.waitUntilConnected(timeout: .seconds(15))
        try await body(fixture)
    } catch {
        failure = error
    }
    for queue in names.allQueueNames + [events] { _ = try? await amqp.deleteQueue(queue) }
    await amqp.close()
    var cursor = "0"
    for _ in 0..<10_000 {
        let reply = try await redis.execute("SCAN", cursor, "MATCH", "\(keyPrefix):*", "COUNT", "1000")
        guard let page = reply.array, page.count == 2 else { break }
        cursor = page[0].string ?? "0"
        let keys = (page[1].array ?? []).compactMap(\.string)
        if !keys.isEmpty { try await redis.execute(RedisCommand(["UNLINK"] + keys)) }
        if cursor == "0" { break }
    }
    await redis.close()
    if let failure { throw failure }
}

/// Polls `condition` every 50 ms until it holds, for at most 10 s; then fails the test.
func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw FeedbackTestFailure("\(what): not true within 10 s")
}
