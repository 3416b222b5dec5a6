import AMQP
import Foundation
import PushCore
import PushIngest
import PushServiceKit
import Redis
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing
import TokenRegistry

/// The `push.registrations` consumer against the shared test RabbitMQ and Redis
/// (`TestServers.amqpURL`, `TestServers.redisURL`); fails when either is not running. Each test
/// declares its own `PushQueues` prefix and uses its own app id, and removes both at the end.
@Suite("Registration queue consumer against real RabbitMQ and Redis", .timeLimit(.minutes(2)))
struct RegistrationQueueConsumerTests {
    @Test func aValidRegistrationLandsInRedisAndRedeliveryIsHarmless() async throws {
        try await withRegistrationQueueFixture("valid") { fixture in
            let token = fixture.token(1)
            let body =
                #"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "user": "alice", "locale": "de-CH", "topics": ["news", "sports"], "settings": {"badge": false}}"#
            try await fixture.run { _ in
                try await fixture.publish(body)
                let record = try await fixture.eventuallyRecord(token) { $0 != nil }
                #expect(record?.user == "alice")
                #expect(record?.locale == "de-CH")
                #expect(record?.environment == .sandbox, "the app's default environment")
                #expect(record?.topics == ["news", "sports"])
                #expect(record?.settings == NotificationSettings(alert: true, badge: false, sound: true))
                #expect(record?.registeredAt == 1_000)

                // The same message again (as after a redelivery): same record, same sets, nothing doubled.
                fixture.clock.set(2_000)
                try await fixture.publish(body)
                let again = try await fixture.eventuallyRecord(token) { $0?.updatedAt == 2_000 }
                #expect(again?.registeredAt == 1_000)
                #expect(again?.user == "alice" && again?.topics == ["news", "sports"])
                #expect(try await fixture.members(fixture.keys.user("alice")) == [token.hex])
                #expect(try await fixture.members(fixture.keys.topic("news")) == [token.hex])
                #expect(try await fixture.members(fixture.keys.tokens) == [token.hex])
            }
            #expect(try await fixture.amqp.queueStatus(fixture.names.registrations.name).messages == 0)
            #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
        }
    }

    @Test func aDeleteOperationRemovesTheToken() async throws {
        try await withRegistrationQueueFixture("delete") { fixture in
            let token = fixture.token(2)
            try await fixture.run { _ in
                try await fixture.publish(#"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "user": "bob", "topics": ["news"]}"#)
                _ = try await fixture.eventuallyRecord(token) { $0 != nil }
                try await fixture.publish(#"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "op": "delete"}"#)
                _ = try await fixture.eventuallyRecord(token) { $0 == nil }
                #expect(try await fixture.members(fixture.keys.user("bob")).isEmpty)
                #expect(try await fixture.members(fixture.keys.topic("news")).isEmpty)
                #expect(try await fixture.members(fixture.keys.tokens).isEmpty)
                // Deleting what is not there is fine too, and goes nowhere near the dead queue.
                try await fixture.publish(#"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "op": "delete"}"#)
                try await eventually("the second delete is consumed") {
                    try await fixture.amqp.queueStatus(fixture.names.registrations.name).messages == 0
                }
            }
            #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
        }
    }

    /// Redeliveries bring messages in any order: the registry applies each only if it is newer than
    /// what it holds, and a deletion leaves a tombstone so an older registration cannot revive the
    /// device (issue 18, item 6).
    @Test func registrationsApplyInEventOrderWhateverOrderTheyArriveIn() async throws {
        try await withRegistrationQueueFixture("order") { fixture in
            let token = fixture.token(7)
            let base: Int64 = 1_767_225_000_000
            fixture.clock.set(base + 5_000)
            func message(_ at: Int64, _ fields: String) -> String {
                #"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "registered_at": \#(at)\#(fields)}"#
            }
            /// Runs the consumer until the queue is drained, then shuts it down, which waits for the
            /// work in flight: once this returns every message published before was applied (or not).
            func consumeEverything() async throws {
                try await fixture.run { _ in
                    try await eventually("the registrations queue is drained") {
                        try await fixture.amqp.queueStatus(fixture.names.registrations.name).messages == 0
                    }
                }
            }
            try await fixture.publish(message(base + 2_000, #", "user": "new", "topics": ["news"]"#))
            try await consumeEverything()
            #expect(try await fixture.registry.record(app: fixture.app, token: token)?.updatedAt == base + 2_000)
            // Older news, arriving late: a delete and a registration from before the stored one.
            try await fixture.publish(message(base + 1_000, #", "op": "delete""#))
            try await fixture.publish(message(base + 500, #", "user": "old", "topics": ["sports"]"#))
            try await consumeEverything()
            let kept = try await fixture.registry.record(app: fixture.app, token: token)
            #expect(kept?.user == "new" && kept?.topics == ["news"] && kept?.updatedAt == base + 2_000)
            #expect(try await fixture.members(fixture.keys.user("old")).isEmpty)
            #expect(try await fixture.members(fixture.keys.topic("sports")).isEmpty)

            // A newer delete removes it; a registration from before that delete cannot bring it back.
            try await fixture.publish(message(base + 3_000, #", "op": "delete""#))
            try await consumeEverything()
            #expect(try await fixture.registry.record(app: fixture.app, token: token) == nil)
            try await fixture.publish(message(base + 2_500, #", "user": "zombie""#))
            try await consumeEverything()
            #expect(try await fixture.registry.record(app: fixture.app, token: token) == nil)
            #expect(try await fixture.members(fixture.keys.tokens).isEmpty)
            #expect(try await fixture.registry.deletedAt(app: fixture.app, token: token) == base + 3_000)

            // Registering again after the delete works, and clears the tombstone.
            try await fixture.publish(message(base + 4_000, #", "user": "back""#))
            try await consumeEverything()
            let back = try await fixture.registry.record(app: fixture.app, token: token)
            #expect(back?.user == "back" && back?.registeredAt == base + 4_000)
            #expect(try await fixture.registry.deletedAt(app: fixture.app, token: token) == nil)
            #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
        }
    }

    @Test func aRegisteredAtOutsideTheWindowIsDeadLetteredNamingTheField() async throws {
        try await withRegistrationQueueFixture("window") { fixture in
            let token = fixture.token(8)
            let now: Int64 = 1_767_225_000_000
            fixture.clock.set(now)
            let bodies = [
                #"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "registered_at": \#(now + 10 * 60_000)}"#,
                #"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "registered_at": \#(now - 8 * 86_400_000)}"#,
                #"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "registered_at": "yesterday"}"#,
                #"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "registered_at": 99999999999999999999999}"#,
            ]
            try await fixture.run { _ in
                for body in bodies { try await fixture.publish(body) }
                let dead = try await fixture.receive(from: fixture.names.dead, count: bodies.count)
                for delivery in dead {
                    let reason = delivery.properties.headers[PushQueues.errorHeader]?.stringValue ?? ""
                    #expect(reason.hasPrefix("registered_at: "), "\(reason)")
                }
            }
            #expect(try await fixture.registry.record(app: fixture.app, token: token) == nil)
        }
    }

    @Test func invalidMessagesAreDeadLetteredWithTheReasonAndLaterOnesStillProcessed() async throws {
        try await withRegistrationQueueFixture("invalid") { fixture in
            let token = fixture.token(3)
            let invalid: [(body: String, reasonPrefix: String)] = [
                ("this is not JSON", "body: "),
                (#"{"app": "com.example.unknown", "token": "\#(token.hex)"}"#, "app: names no configured app"),
                (#"{"app": "\#(fixture.app)", "token": "not-a-token"}"#, "token: "),
                (#"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "settings": {"alert": "yes"}}"#, "settings.alert: must be true or false"),
            ]
            try await fixture.run { _ in
                for (index, message) in invalid.enumerated() {
                    try await fixture.publish(message.body, headers: ["x-test-index": .int64(Int64(index))], messageID: "m-\(index)")
                }
                try await fixture.publish(#"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "user": "carol"}"#)
                let record = try await fixture.eventuallyRecord(token) { $0 != nil }
                #expect(record?.user == "carol")

                let dead = try await fixture.receive(from: fixture.names.dead, count: invalid.count)
                #expect(dead.count == invalid.count)
                for delivery in dead {
                    let index = try #require(delivery.properties.headers["x-test-index"]?.intValue.map { Int($0) })
                    let reason = delivery.properties.headers[PushQueues.errorHeader]?.stringValue ?? ""
                    #expect(String(decoding: delivery.body, as: UTF8.self) == invalid[index].body, "the original body")
                    #expect(reason.hasPrefix(invalid[index].reasonPrefix), "message \(index): \(reason)")
                    #expect(delivery.properties.messageID == "m-\(index)", "properties are kept")
                    #expect(delivery.properties.contentType == "application/json")
                    #expect(delivery.properties.persistent)
                }
            }
            #expect(try await fixture.amqp.queueStatus(fixture.names.registrations.name).messages == 0)
        }
    }

    @Test func anUnavailableRedisSendsTheMessageToTheFirstRetryTier() async throws {
        // A registry whose Redis is a closed port: every write fails as unavailable within the timeout.
        let unreachable = try RedisConfiguration(url: "redis://127.0.0.1:1/0?connect_timeout_ms=200&command_timeout_ms=300&pool_size=1")
        let downRedis = RedisClient(configuration: unreachable, logger: registrationQueueTestLogger)
        try await withRegistrationQueueFixture("unavailable", registryRedis: downRedis) { fixture in
            let token = fixture.token(4)
            let body = #"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "user": "dave"}"#
            let tier = fixture.names.registrations.retryQueue(tier: 0)
            try await fixture.run { _ in
                try await fixture.publish(body)
                try await eventually("the message reaches \(tier)") {
                    try await fixture.amqp.queueStatus(tier).messages == 1
                }
            }
            // Taken off the tier before its 5 s delay sends it back.
            let retried = try await fixture.receive(from: tier, count: 1)
            #expect(retried.first.map { String(decoding: $0.body, as: UTF8.self) } == body)
            #expect(retried.first?.properties.headers[DeliverySettler.retriesHeader]?.intValue == 1)
            #expect(retried.first?.properties.headers[PushQueues.errorHeader] == nil)
            #expect(try await fixture.amqp.queueStatus(fixture.names.registrations.name).messages == 0)
            #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
        }
        await downRedis.close()
    }

    /// Graceful shutdown with a backlog: the consumer stops taking deliveries, finishes what it holds,
    /// and returns; once the connection closes, every message is either in Redis or back in the queue,
    /// exactly once.
    @Test func gracefulShutdownFinishesInFlightWorkAndLosesNothing() async throws {
        try await withRegistrationQueueFixture("drain") { fixture in
            let count = 2_000
            let prefix = TestTokens.randomPrefix()
            for chunk in stride(from: 0, to: count, by: 200) {
                let messages = (chunk..<min(chunk + 200, count)).map { index in
                    AMQPOutboundMessage(
                        exchange: fixture.names.exchange,
                        routingKey: fixture.names.registrations.routingKey,
                        body: Array(#"{"app": "\#(fixture.app)", "token": "\#(fixture.token(index, prefix: prefix).hex)", "topics": ["all"]}"#.utf8)
                    )
                }
                for result in await fixture.amqp.publish(messages) { try result.get() }
            }
            try await fixture.run(prefetch: 20) { group in
                try await eventually("some registrations are stored") {
                    try await fixture.members(fixture.keys.tokens).count >= 50
                }
                await group.triggerGracefulShutdown()
            }
            // Settled deliveries are final once the channel closes; unsettled ones would be requeued.
            await fixture.amqp.close()
            let stored = try await fixture.members(fixture.keys.tokens).count
            let requeued = try await withAMQPConnection(name: "registration-queue-tests-admin") { connection in
                try await connection.queueStatus(fixture.names.registrations.name).messages
            }
            #expect(stored > 0)
            #expect(stored + requeued == count, "\(stored) stored + \(requeued) in the queue")
            #expect(try await fixture.members(fixture.keys.topic("all")).count == stored)
        }
    }
}

// MARK: - Fixture

private let registrationQueueTestLogger = TestLogger.make("registration-queue-tests")

/// A settable clock for `updated_at`, shared with the consumer.
private final class RegistrationQueueTestClock: Sendable {
    private let milliseconds = Mutex<Int64>(1_000)
    func set(_ value: Int64) { milliseconds.withLock { $0 = value } }
    var now: Int64 { milliseconds.withLock { $0 } }
}

private struct RegistrationQueueFixture: Sendable {
    let names: PushQueues
    let app: String
    let apps: AppsFile
    let amqp: AMQPConnection
    let redis: RedisClient
    let registry: TokenRegistry
    /// The app's registry keys in every shard.
    let keys: RegistrySets
    let clock: RegistrationQueueTestClock

    func token(_ seed: Int, prefix: String = "a1b2c3d4") -> DeviceToken {
        TestTokens.numbered(seed, prefix: prefix)
    }

    func publish(_ body: String, headers: AMQPTable = [:], messageID: String? = nil) async throws {
        try await amqp.publish(
            AMQPOutboundMessage(
                exchange: names.exchange,
                routingKey: names.registrations.routingKey,
                body: Array(body.utf8),
                properties: AMQPProperties(headers: headers, messageID: messageID)
            )
        )
    }

    /// Runs a consumer in a service group while `body` runs, then shuts it down gracefully and waits
    /// for it to return (failing the test if it takes more than 15 s).
    func run(prefetch: UInt16 = 50, _ body: (ServiceGroup) async throws -> Void) async throws {
        let consumer = RegistrationQueueConsumer(
            amqp: amqp,
            registry: registry,
            apps: apps,
            queues: names,
            prefetch: prefetch,
            logger: registrationQueueTestLogger,
            now: { [clock] in clock.now }
        )
        try await withRunningServices([consumer], logger: registrationQueueTestLogger, shutdownWithin: .seconds(15), body)
    }

    /// Polls the record until `condition` holds, and returns it.
    func eventuallyRecord(_ token: DeviceToken, _ condition: @escaping (DeviceRecord?) -> Bool) async throws -> DeviceRecord? {
        var record: DeviceRecord?
        try await eventually("the record of \(token.redacted) is as expected") {
            record = try await registry.record(app: app, token: token)
            return condition(record)
        }
        return record
    }

    func members(_ key: String) async throws -> [String] {
        try await redis.execute("SMEMBERS", key).array?.compactMap(\.string).sorted() ?? []
    }

    /// The members of a registry set in every shard, sorted.
    func members(_ set: RegistrySet) async throws -> [String] {
        try await redis.members(set)
    }

    /// Takes `count` messages off `queue` (acking them), or fails after 10 s.
    func receive(from queue: String, count: Int) async throws -> [AMQPDelivery] {
        try await amqp.receive(from: queue, count: count, timeout: .seconds(10))
    }
}

/// Declares a fresh push topology and app, runs `body`, then deletes the queues and Redis keys.
private func withRegistrationQueueFixture(
    _ name: String,
    registryRedis: RedisClient? = nil,
    _ body: (RegistrationQueueFixture) async throws -> Void
) async throws {
    let names = PushQueues(prefix: TestServers.uniqueName("ingest-\(name)"))
    let app = TestServers.uniqueName("com.test.queue-\(name)")
    let apps = try AppsFile(apps: [.test(app, environment: .sandbox)])
    let configuration = try AMQPConfiguration(url: TestServers.amqpURL, connectionName: "registration-queue-tests")
    let amqp = AMQPConnection(configuration: configuration, topology: .push(names), logger: registrationQueueTestLogger)
    let redis = try await TestServers.connectRedis(logger: registrationQueueTestLogger)
    let registry = TokenRegistry(redis: registryRedis ?? redis)
    let fixture = RegistrationQueueFixture(
        names: names,
        app: app,
        apps: apps,
        amqp: amqp,
        redis: redis,
        registry: registry,
        // Read with the working client: the registry's may be one to a Redis that is down.
        keys: try await RegistrySets(registry: TokenRegistry(redis: redis), app: app),
        clock: RegistrationQueueTestClock()
    )
    try await withCleanUp {
        try await amqp.waitUntilConnected(timeout: .seconds(15))
        try await body(fixture)
    } cleanUp: {
        await amqp.close()
        try await withAMQPConnection(name: "registration-queue-tests-admin") { connection in
            for queue in names.allQueueNames { _ = try? await connection.deleteQueue(queue) }
        }
        // Every key of the app (its id is this test's alone): `push:{app}:*` and its shards' `push:{app#…`.
        try await redis.deleteKeys(matching: "push:\\{\(fixture.app)\\}:*")
        try await redis.deleteKeys(matching: "push:\\{\(fixture.app)#*")
        await redis.close()
    }
}

extension RegistrationQueueConsumerTests {
    /// A device's Live Activity tokens arrive on `push.registrations` too (issue 13): a push-to-start
    /// token, an activity's update token, and the activity's end; a message naming both slots is dead-lettered.
    @Test func liveActivityTokensAreRegisteredAndRemovedFromTheQueue() async throws {
        try await withRegistrationQueueFixture("activity") { fixture in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            fixture.clock.set(now)
            let device = fixture.token(10)
            let start = fixture.token(11)
            let update = fixture.token(12)
            let slot = ActivityTokenSlot.activity(id: "match-1234")
            try await fixture.run { _ in
                try await fixture.publish(#"{"app": "\#(fixture.app)", "token": "\#(device.hex)", "user": "carol", "locale": "fr-FR"}"#)
                _ = try await fixture.eventuallyRecord(device) { $0 != nil }
                try await fixture.publish(
                    #"{"app": "\#(fixture.app)", "token": "\#(device.hex)", "push_to_start": "MatchAttributes", "push_token": "\#(start.hex)"}"#)
                try await fixture.publish(
                    #"{"app": "\#(fixture.app)", "token": "\#(device.hex)", "activity": "match-1234", "push_token": "\#(update.hex)", "expires_at": \#(now / 1000 + 3600)}"#
                )
                try await eventually("both tokens are stored") {
                    let pts = try await fixture.registry.activityToken(
                        app: fixture.app, device: device, slot: .pushToStart(attributesType: "MatchAttributes"))
                    let activity = try await fixture.registry.activityToken(app: fixture.app, device: device, slot: slot)
                    return pts?.pushToken == start && pts?.user == "carol" && activity?.pushToken == update && activity?.locale == "fr-FR"
                        && activity?.expiresAt == (now / 1000 + 3600) * 1000
                }
                #expect(try await fixture.members(fixture.keys.activityTokens(activityID: "match-1234")) == [update.hex])
                fixture.clock.set(now + 1_000)
                try await fixture.publish(#"{"app": "\#(fixture.app)", "token": "\#(device.hex)", "activity": "match-1234", "op": "delete"}"#)
                try await eventually("the activity's token is gone") {
                    try await fixture.registry.activityToken(app: fixture.app, device: device, slot: slot) == nil
                }
                #expect(try await fixture.members(fixture.keys.activityTokens(activityID: "match-1234")).isEmpty)
                try await fixture.publish(
                    #"{"app": "\#(fixture.app)", "token": "\#(device.hex)", "activity": "m", "push_to_start": "T", "push_token": "\#(update.hex)"}"#)
                let dead = try await fixture.receive(from: fixture.names.dead, count: 1)
                #expect(dead[0].properties.headers[PushQueues.errorHeader]?.stringValue?.hasPrefix("activity:") == true, "names the field")
            }
        }
    }
}
