import AMQP
import APNs
import Foundation
import PushCore
import Testing

@testable import PushSend

/// Per-batch outcome accounting without servers: every token ends in exactly one place, and the
/// messages published before the ack say so.
@Suite struct SendBatchReportTests {
    static let now: Int64 = 1_767_225_000_000
    static let queues = PushQueues(prefix: "t")
    static let policy = RetryPolicy(tiers: queues.send.retryTiers, maxAttempts: 3, maxDeferrals: 2)

    static func token(_ n: Int) -> String {
        let tail = String(n, radix: 16)
        return String(repeating: "a", count: 64 - tail.count) + tail
    }

    static func batch(tokens: Int, attempt: Int = 0, expiration: Int64? = nil) -> SendBatch {
        SendBatch(
            requestID: "req-1", batchID: "req-1/0", app: "com.example.app", environment: .production, pushType: "alert",
            priority: 10, expiration: expiration, payload: #"{"aps":{"alert":"hi"}}"#, tokens: (0..<tokens).map(token), attempt: attempt,
            createdAt: now - 1000
        )
    }

    static func decode<T: Decodable>(_ type: T.Type, _ message: AMQPOutboundMessage) throws -> T {
        try JSONDecoder().decode(type, from: Data(message.body))
    }

    @Test func everyOutcomeGoesWhereTheRulesSay() throws {
        let batch = Self.batch(tokens: 9)
        var report = SendBatchReport(batch: batch, deferrals: 0)
        let t = batch.tokens
        report.record(t[0], .delivered)
        report.record(t[1], .alreadyDelivered)
        report.record(t[2], .invalidToken(reason: "Unregistered", since: 1_767_000_000_000))
        report.record(t[3], .invalidToken(reason: "BadDeviceToken", since: nil))
        report.record(t[4], .retry(reason: "ConnectionLost"))
        report.record(t[5], .retry(reason: "ServiceUnavailable", wait: .serverError))
        report.record(t[6], .permanent(reason: "PayloadTooLarge", detail: "APNs refused the notification: 413 PayloadTooLarge"))
        report.record(t[7], .deferred(reason: "RateLimited", retryAfter: .seconds(3)))
        report.record(t[8], .dropped(reason: "RateLimited"))
        let plan = report.plan(policy: Self.policy, now: Self.now, credentialPause: .seconds(60))

        #expect(plan.delivered == 1 && plan.alreadyDelivered == 1)
        #expect(plan.failures["Unregistered"] == [t[2]])
        #expect(plan.failures["BadDeviceToken"] == [t[3]])
        #expect(plan.failures["PayloadTooLarge"] == [t[6]])
        #expect(plan.failures["RateLimited"] == [t[8]])
        #expect(plan.retried == ["ConnectionLost": 1, "ServiceUnavailable": 1])
        #expect(plan.deferred == ["RateLimited": 1])
        #expect(
            plan.feedback == [
                FeedbackEvent(
                    app: "com.example.app", token: t[2], reason: "Unregistered", timestamp: 1_767_000_000_000, reportedAt: Self.now,
                    requestID: plan.batch.requestID),
                FeedbackEvent(
                    app: "com.example.app", token: t[3], reason: "BadDeviceToken", timestamp: nil, reportedAt: Self.now,
                    requestID: plan.batch.requestID),
            ], "with the request, whose report counts the removal")
        #expect(plan.credentialProblem == nil && !plan.isUnfinished)

        let messages = plan.messages(queues: Self.queues)
        // Retries (attempt 1: the 1 s tier after a lost connection, the 15 min tier after a 503),
        // deferral (attempt 0, 5 s tier), one dead letter, two feedback, 1 delivered + 4 failed events.
        #expect(messages.count == 3 + 1 + 2 + 5)
        let retry = try #require(messages.first { $0.routingKey == Self.queues.send.retryQueue(tier: 0) })
        #expect(retry.exchange == "", "tiers are reached through the default exchange")
        let retried = try Self.decode(SendBatch.self, retry)
        #expect(retried.tokens == [t[4]] && retried.attempt == 1 && retried.batchID == "req-1/0#a1d0")
        let later = try #require(messages.first { $0.routingKey == "t.send.retry.15m" }, "Apple's 15 minutes after a 5xx")
        #expect(try Self.decode(SendBatch.self, later).tokens == [t[5]])
        #expect(later.properties.timestamp == UInt64(Self.now / 1000) + 900)
        #expect(retry.properties.headers[SendBatchPlan.deferralsHeader]?.intValue == 0)
        let deferral = try #require(messages.first { $0.routingKey == Self.queues.send.retryQueue(tier: 1) })
        let deferred = try Self.decode(SendBatch.self, deferral)
        #expect(deferred.tokens == [t[7]] && deferred.attempt == 0)
        #expect(deferral.properties.headers[SendBatchPlan.deferralsHeader]?.intValue == 1)
        // Stamped with when each is due back in push.send (now + its tier), so message age is the wait there.
        let stamp = UInt64(Self.now / 1000)
        #expect(retry.properties.timestamp == stamp + 1 && deferral.properties.timestamp == stamp + 5)

        let dead = try #require(messages.first { $0.routingKey == Self.queues.deadRoutingKey })
        #expect(dead.exchange == Self.queues.exchange)
        #expect(dead.properties.timestamp == stamp)
        #expect(try Self.decode(SendBatch.self, dead).tokens == [t[6]])
        #expect(dead.properties.headers[PushQueues.errorHeader]?.stringValue == "PayloadTooLarge: APNs refused the notification: 413 PayloadTooLarge")

        let events = try messages.filter { $0.exchange == Self.queues.eventsExchange }.map { try Self.decode(PushEvent.self, $0) }
        #expect(
            events.map(\.routingKey) == ["delivered", "failed.BadDeviceToken", "failed.PayloadTooLarge", "failed.RateLimited", "failed.Unregistered"])
        #expect(events.first?.count == 2, "delivered now and earlier")
        #expect(messages.filter { $0.exchange == Self.queues.eventsExchange }.allSatisfy { !$0.mandatory })
        #expect(messages.filter { $0.routingKey == Self.queues.feedback.routingKey }.count == 2)
    }

    @Test func retriesOutOfAttemptsAreDeadLetteredAndExpiredOnesReported() throws {
        var report = SendBatchReport(batch: Self.batch(tokens: 2, attempt: 2), deferrals: 0)
        report.record(Self.token(0), .retry(reason: "TooManyRequests"))
        report.record(Self.token(1), .deferred(reason: "RateLimited", retryAfter: .seconds(1)))
        let plan = report.plan(policy: Self.policy, now: Self.now, credentialPause: .seconds(60))
        #expect(plan.republished.count == 1, "the deferral does not count as an attempt")
        #expect(plan.deadLetters.map(\.reason) == ["TooManyRequests"])
        #expect(plan.deadLetters.first?.detail == "gave up after 3 attempts; last answer TooManyRequests")
        #expect(plan.failures["TooManyRequests"] == [Self.token(0)])

        var expiring = SendBatchReport(batch: Self.batch(tokens: 1, expiration: Self.now / 1000 + 2), deferrals: 0)
        expiring.record(Self.token(0), .deferred(reason: "RateLimited", retryAfter: .seconds(4)))
        let expired = expiring.plan(policy: Self.policy, now: Self.now, credentialPause: .seconds(60))
        #expect(expired.failures == ["Expired": [Self.token(0)]])
        #expect(expired.republished.isEmpty && expired.deadLetters.isEmpty)
    }

    @Test func deferralsAreBoundedAndCredentialProblemsDeferByThePause() {
        var report = SendBatchReport(batch: Self.batch(tokens: 2), deferrals: 2)
        report.record(Self.token(0), .deferred(reason: "RateLimited", retryAfter: .seconds(1)))
        report.record(Self.token(1), .credentialProblem(reason: "InvalidProviderToken"))
        let plan = report.plan(policy: Self.policy, now: Self.now, credentialPause: .seconds(60))
        #expect(plan.credentialProblem == "InvalidProviderToken")
        #expect(plan.republished.isEmpty, "both used up their deferrals")
        #expect(Set(plan.deadLetters.map(\.reason)) == ["RateLimited", "InvalidProviderToken"])

        var fresh = SendBatchReport(batch: Self.batch(tokens: 1), deferrals: 0)
        fresh.record(Self.token(0), .credentialProblem(reason: "InvalidProviderToken"))
        let paused = fresh.plan(policy: Self.policy, now: Self.now, credentialPause: .seconds(60))
        #expect(paused.republished.map(\.tier) == [3], "the 2 min tier covers a 60 s pause")
        #expect(paused.republished.first?.batch.tokens == [Self.token(0)])
        #expect(paused.failures.isEmpty)
    }

    @Test func anUnfinishedTokenReturnsTheWholeBatch() {
        var report = SendBatchReport(batch: Self.batch(tokens: 2), deferrals: 0)
        report.record(Self.token(0), .delivered)
        report.record(Self.token(1), .unfinished)
        #expect(report.plan(policy: Self.policy, now: Self.now, credentialPause: .seconds(1)).isUnfinished)
    }

    @Test func batchIDsOfRepublishedBatchesStayShort() {
        let batch = Self.batch(tokens: 1)
        let once = batch.narrowed(to: batch.tokens, attempt: 1, deferrals: 0)
        let twice = once.narrowed(to: batch.tokens, attempt: 2, deferrals: 3)
        #expect(once.batchID == "req-1/0#a1d0")
        #expect(twice.batchID == "req-1/0#a2d3")
    }

    @Test func apnsAnswersAndTransportErrorsAreClassified() {
        #expect(TokenOutcome(response: APNsResponse(status: 200)) == .delivered)
        #expect(
            TokenOutcome(response: APNsResponse(status: 410, reason: .unregistered, timestamp: 42))
                == .invalidToken(reason: "Unregistered", since: 42))
        #expect(TokenOutcome(response: APNsResponse(status: 400, reason: .badDeviceToken)) == .invalidToken(reason: "BadDeviceToken", since: nil))
        #expect(
            TokenOutcome(response: APNsResponse(status: 400, reason: .deviceTokenNotForTopic))
                == .invalidToken(reason: "DeviceTokenNotForTopic", since: nil))
        #expect(TokenOutcome(response: APNsResponse(status: 429, reason: .tooManyRequests)) == .retry(reason: "TooManyRequests", wait: .backOff))
        #expect(TokenOutcome(response: APNsResponse(status: 500)) == .retry(reason: "InternalServerError", wait: .serverError))
        #expect(
            TokenOutcome(response: APNsResponse(status: 503, reason: .serviceUnavailable)) == .retry(reason: "ServiceUnavailable", wait: .serverError)
        )
        #expect(TokenOutcome(response: APNsResponse(status: 503, reason: .shutdown)) == .retry(reason: "Shutdown", wait: .prompt))
        #expect(
            TokenOutcome(response: APNsResponse(status: 403, reason: .invalidProviderToken)) == .credentialProblem(reason: "InvalidProviderToken"))
        #expect(TokenOutcome(response: APNsResponse(status: 403, reason: .badCertificate)) == .credentialProblem(reason: "BadCertificate"))
        if case .permanent(let reason, _) = TokenOutcome(response: APNsResponse(status: 413, reason: .payloadTooLarge)) {
            #expect(reason == "PayloadTooLarge")
        } else {
            Issue.record("413 is permanent")
        }
        if case .permanent(let reason, _) = TokenOutcome(response: APNsResponse(status: 400, reason: .topicDisallowed)) {
            #expect(reason == "TopicDisallowed")
        } else {
            Issue.record("TopicDisallowed is permanent")
        }
        #expect(TokenOutcome(error: APNsClientError(.connectionLost, "GOAWAY")) == .retry(reason: "ConnectionLost"))
        #expect(TokenOutcome(error: APNsClientError(.timeout, "no answer")) == .retry(reason: "Timeout"))
        #expect(TokenOutcome(error: APNsClientError(.overloaded, "full")) == .retry(reason: "Overloaded"))
        #expect(TokenOutcome(error: APNsClientError(.shutdown, "stopping")) == .unfinished)
        #expect(TokenOutcome(error: APNsClientError(.credentials, "bad p8")) == .credentialProblem(reason: "InvalidCredentials"))
    }
}
