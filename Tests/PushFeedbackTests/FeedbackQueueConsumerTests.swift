import AMQP
import Foundation
import PushCore
import PushFeedback
import PushServiceKit
import Redis
import ServiceLifecycle
import TestSupport
import Testing
import TokenRegistry

/// The `push.feedback` consumer against the shared test RabbitMQ and Redis: CONTRACT.md's
/// invalid-token rule, the sets a removal leaves, `token.removed` events, dead letters, redelivery.
@Suite("Feedback consumer against real RabbitMQ and Redis", .timeLimit(.minutes(2)))
struct FeedbackQueueConsumerTests {
    @Test func aTokenOlderThanTheReportIsRemovedFromRecordAndEverySetAndAnnounced() async throws {
        try await withFeedbackFixture("removed") { fixture in
            let dead = fixture.token(1)
            let sibling = fixture.token(2)
            try await fixture.register(dead, user: "alice", topics: ["news", "sports"], at: 1_000)
            try await fixture.register(sibling, user: "alice", topics: ["news"], at: 1_500)
            try await fixture.runConsumer { _ in
                try await fixture.publishFeedback(fixture.feedbackBody(dead, timestamp: 2_000))
                let events = try await fixture.removedEvents(count: 1)
                #expect(events == [PushEvent.tokenRemoved(app: fixture.app, token: dead.hex, reason: "Unregistered", at: 50_000)])
            }
            #expect(try await fixture.record(dead) == nil)
            #expect(try await fixture.record(sibling) != nil)
            #expect(try await fixture.members(fixture.keys.user("alice")) == [sibling.hex], "the user keeps only the live token")
            #expect(try await fixture.members(fixture.keys.topic("news")) == [sibling.hex])
            #expect(try await fixture.members(fixture.keys.topic("sports")).isEmpty)
            #expect(try await fixture.members(fixture.keys.tokens) == [sibling.hex])
            #expect(try await fixture.depth(fixture.names.feedback.name) == 0)
            #expect(try await fixture.depth(fixture.names.dead) == 0)
        }
    }

    @Test func aTokenRegisteredAgainAfterTheReportIsKept() async throws {
        try await withFeedbackFixture("kept") { fixture in
            let token = fixture.token(3)
            try await fixture.register(token, user: "bob", topics: ["news"], at: 1_000)
            try await fixture.register(token, user: "bob", topics: ["news"], at: 3_000)
            let atTheMoment = fixture.token(4)
            try await fixture.register(atTheMoment, at: 2_000)
            try await fixture.runConsumer { _ in
                // APNs' timestamp 2 000 is before the re-registration at 3 000: the device came back.
                try await fixture.publishFeedback(fixture.feedbackBody(token, timestamp: 2_000, reportedAt: 4_000))
                // Registered exactly at the reported moment is not "after" it: removed.
                try await fixture.publishFeedback(fixture.feedbackBody(atTheMoment, reason: "BadDeviceToken", timestamp: nil, reportedAt: 2_000))
                let events = try await fixture.removedEvents(count: 1)
                #expect(events.map(\.token) == [atTheMoment.hex])
                #expect(events.first?.reason == "BadDeviceToken")
                try await eventually("both events are consumed") { try await fixture.depth(fixture.names.feedback.name) == 0 }
            }
            let record = try #require(try await fixture.record(token))
            #expect(record.updatedAt == 3_000)
            #expect(try await fixture.members(fixture.keys.user("bob")) == [token.hex])
            #expect(try await fixture.members(fixture.keys.topic("news")) == [token.hex])
            #expect(try await fixture.record(atTheMoment) == nil)
            #expect(try await fixture.depth(fixture.events) == 0, "nothing announced for the kept token")
        }
    }

    @Test func theSameEventTwiceIsHarmless() async throws {
        try await withFeedbackFixture("redelivered") { fixture in
            let token = fixture.token(5)
            let other = fixture.token(6)
            try await fixture.register(token, user: "carol", at: 1_000)
            try await fixture.register(other, user: "carol", at: 1_000)
            let body = fixture.feedbackBody(token, timestamp: 2_000)
            try await fixture.runConsumer { _ in
                try await fixture.publishFeedback(body)
                _ = try await fixture.removedEvents(count: 1)
                try await fixture.publishFeedback(body)
                try await eventually("the duplicate is consumed") { try await fixture.depth(fixture.names.feedback.name) == 0 }
                // A token registered anew after the duplicate's timestamp survives it too.
                try await fixture.register(token, user: "carol", at: 5_000)
                try await fixture.publishFeedback(body)
                try await eventually("the late duplicate is consumed") { try await fixture.depth(fixture.names.feedback.name) == 0 }
            }
            #expect(try await fixture.record(token)?.updatedAt == 5_000)
            #expect(try await fixture.members(fixture.keys.user("carol")) == [other.hex, token.hex].sorted())
            #expect(try await fixture.depth(fixture.events) == 0, "the duplicate announced nothing")
            #expect(try await fixture.depth(fixture.names.dead) == 0)
        }
    }

    /// A push-feedback that removed a token and died before announcing it or acking: the broker
    /// redelivers the event, which finds the token gone, and the removal is announced all the same.
    @Test func aRedeliveredEventAnnouncesARemovalWhoseFirstTryDied() async throws {
        try await withFeedbackFixture("crashed") { fixture in
            let token = fixture.token(9)
            try await fixture.register(token, user: "finn", at: 1_000)
            try await fixture.publishFeedback(fixture.feedbackBody(token, timestamp: 2_000))
            let crashing = AMQPConnection(configuration: fixture.amqp.configuration, logger: FeedbackFixture.logger)
            try await crashing.waitUntilConnected(timeout: .seconds(15))
            var deliveries = crashing.consume(queue: fixture.names.feedback.name, prefetch: 1).makeAsyncIterator()
            let first = try #require(try await deliveries.next())
            #expect(!first.redelivered)
            let report = try InvalidTokenReport(feedbackBody: first.body)
            _ = try await fixture.remover().remove([report], now: 40_000, reannounce: { _ in false })
            await crashing.close()  // never acked: back in the queue, marked redelivered

            try await fixture.runConsumer { _ in
                let events = try await fixture.removedEvents(count: 1)
                #expect(events == [PushEvent.tokenRemoved(app: fixture.app, token: token.hex, reason: "Unregistered", at: 40_000)])
                try await eventually("the redelivered event is consumed") { try await fixture.depth(fixture.names.feedback.name) == 0 }
            }
            #expect(try await fixture.record(token) == nil)
            #expect(try await fixture.members(fixture.keys.user("finn")).isEmpty)
            #expect(try await fixture.depth(fixture.names.dead) == 0)
        }
    }

    @Test func anUnavailableRedisSendsTheEventsToTheFirstRetryTier() async throws {
        let unreachable = try RedisConfiguration(url: "redis://127.0.0.1:1/0?connect_timeout_ms=200&command_timeout_ms=300&pool_size=1")
        let downRedis = RedisClient(configuration: unreachable, logger: FeedbackFixture.logger)
        try await withFeedbackFixture("unavailable", registryRedis: downRedis) { fixture in
            let bodies = [fixture.feedbackBody(fixture.token(11), timestamp: 2_000), fixture.feedbackBody(fixture.token(12), timestamp: 2_000)]
            let tier = fixture.names.feedback.retryQueue(tier: 0)
            try await fixture.runConsumer { _ in
                for body in bodies { try await fixture.publishFeedback(body) }
                try await eventually("both events reach \(tier)") { try await fixture.depth(tier) == 2 }
            }
            // Taken off the tier before its 5 s delay sends them back.
            let retried = try await fixture.receive(from: tier, count: 2)
            #expect(Set(retried.map { String(decoding: $0.body, as: UTF8.self) }) == Set(bodies))
            #expect(retried.allSatisfy { $0.properties.headers[DeliverySettler.retriesHeader]?.intValue == 1 })
            #expect(try await fixture.depth(fixture.names.feedback.name) == 0)
            #expect(try await fixture.depth(fixture.names.dead) == 0)
            #expect(try await fixture.depth(fixture.events) == 0)
        }
        await downRedis.close()
    }

    @Test func malformedEventsAreDeadLetteredWithTheReasonAndTheRestIsProcessed() async throws {
        try await withFeedbackFixture("malformed") { fixture in
            let token = fixture.token(7)
            try await fixture.register(token, at: 1_000)
            let invalid: [(body: String, reasonPrefix: String)] = [
                ("not json", "body: "),
                (#"{"app": "\#(fixture.app)", "reason": "Unregistered", "reported_at": 1}"#, "token: is required"),
                (#"{"app": "\#(fixture.app)", "token": "xyz", "reason": "Unregistered", "reported_at": 1}"#, "token: must be hexadecimal"),
                (#"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "reason": "BadTopic", "reported_at": 1}"#, "reason: must be one of"),
                (
                    #"{"app": "com.example.unknown", "token": "\#(token.hex)", "reason": "Unregistered", "reported_at": 1}"#,
                    "app: names no configured app"
                ),
                (#"{"app": "\#(fixture.app)", "token": "\#(token.hex)", "reason": "Unregistered", "reported_at": "soon"}"#, "reported_at: must be"),
            ]
            try await fixture.runConsumer { _ in
                for (index, message) in invalid.enumerated() {
                    try await fixture.publishFeedback(message.body, headers: ["x-test-index": .int64(Int64(index))], messageID: "m-\(index)")
                }
                try await fixture.publishFeedback(fixture.feedbackBody(token, timestamp: 2_000))
                _ = try await fixture.removedEvents(count: 1)
                let dead = try await fixture.receive(from: fixture.names.dead, count: invalid.count)
                for delivery in dead {
                    let index = try #require(delivery.properties.headers["x-test-index"]?.intValue.map { Int($0) })
                    let reason = delivery.properties.headers[PushQueues.errorHeader]?.stringValue ?? ""
                    #expect(String(decoding: delivery.body, as: UTF8.self) == invalid[index].body, "the original body")
                    #expect(reason.hasPrefix(invalid[index].reasonPrefix), "message \(index): \(reason)")
                    #expect(delivery.properties.messageID == "m-\(index)", "properties are kept")
                }
            }
            #expect(try await fixture.record(token) == nil)
            #expect(try await fixture.depth(fixture.names.feedback.name) == 0)
        }
    }

    /// Many events at once go through in pipelined batches; every token is removed exactly once and
    /// announced once; graceful shutdown leaves nothing unacknowledged.
    @Test func aBacklogIsProcessedInBatchesAndEveryRemovalAnnouncedOnce() async throws {
        try await withFeedbackFixture("backlog") { fixture in
            let count = 600
            let prefix = TestTokens.randomPrefix()
            let tokens = (0..<count).map { fixture.token($0, prefix: prefix) }
            for token in tokens { try await fixture.register(token, user: "u\(token.hex.suffix(1))", topics: ["all"], at: 1_000) }
            for chunk in stride(from: 0, to: count, by: 200) {
                let messages = tokens[chunk..<min(chunk + 200, count)].map { token in
                    AMQPOutboundMessage(
                        exchange: fixture.names.exchange,
                        routingKey: fixture.names.feedback.routingKey,
                        body: Array(fixture.feedbackBody(token, timestamp: 2_000).utf8)
                    )
                }
                for result in await fixture.amqp.publish(messages) { try result.get() }
            }
            try await fixture.runConsumer(configuration: FeedbackConfiguration(batchSize: 64, batchesInFlight: 4)) { _ in
                let events = try await fixture.removedEvents(count: count)
                #expect(Set(events.compactMap(\.token)) == Set(tokens.map(\.hex)))
            }
            #expect(try await fixture.members(fixture.keys.tokens).isEmpty)
            #expect(try await fixture.members(fixture.keys.topic("all")).isEmpty)
            #expect(try await fixture.depth(fixture.names.feedback.name) == 0)
            #expect(try await fixture.depth(fixture.events) == 0, "no event twice")
        }
    }
}

@Suite("Feedback consumer shutdown against real RabbitMQ and Redis", .timeLimit(.minutes(2)))
struct FeedbackQueueConsumerShutdownTests {
    /// Graceful shutdown with a backlog: the consumer stops taking deliveries, finishes and settles
    /// the batches it holds, and returns; every event is then either applied (and announced) or back
    /// in the queue.
    @Test func gracefulShutdownFinishesItsBatchesAndLosesNothing() async throws {
        try await withFeedbackFixture("drain") { fixture in
            let count = 3_000
            let prefix = TestTokens.randomPrefix()
            let tokens = (0..<count).map { fixture.token($0, prefix: prefix) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        for index in stride(from: worker, to: count, by: 8) { try await fixture.register(tokens[index], at: 1_000) }
                    }
                }
                try await group.waitForAll()
            }
            for chunk in stride(from: 0, to: count, by: 500) {
                let messages = tokens[chunk..<min(chunk + 500, count)].map { token in
                    AMQPOutboundMessage(
                        exchange: fixture.names.exchange,
                        routingKey: fixture.names.feedback.routingKey,
                        body: Array(fixture.feedbackBody(token, timestamp: 2_000).utf8)
                    )
                }
                for result in await fixture.amqp.publish(messages) { try result.get() }
            }
            try await fixture.runConsumer(configuration: FeedbackConfiguration(batchSize: 20, batchesInFlight: 2)) { group in
                try await eventually("some tokens are removed") {
                    try await fixture.members(fixture.keys.tokens).count <= count - 100
                }
                await group.triggerGracefulShutdown()
            }
            let remaining = try await fixture.members(fixture.keys.tokens).count
            let removed = count - remaining
            #expect(removed > 0 && remaining > 0, "shut down mid-backlog: \(removed) removed")
            // Unsettled deliveries would go back only when the channel closes; settled ones are final.
            let events = try await fixture.depth(fixture.events)
            let queued = try await fixture.depth(fixture.names.feedback.name)
            #expect(events == removed, "every removal announced once")
            #expect(queued == remaining, "\(queued) still queued for \(remaining) tokens left: nothing acked without being applied")
        }
    }
}
