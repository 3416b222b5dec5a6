import AMQP
import Foundation
import PushCore
import PushSend
import TestSupport
import Testing

/// push-send end to end: real RabbitMQ and Redis (`make test`'s), a private `apns-sandbox`, the real
/// APNs client. Each outcome path, retry tiers, expiration, rate limits and credential pauses.
@Suite("push-send against RabbitMQ, Redis and apns-sandbox", .serialized, .timeLimit(.minutes(3)))
struct SendServiceTests {
    @Test func aBatchIsDeliveredReportedOnceAndRememberedAgainstRedelivery() async throws {
        try await withSendService("delivered") { fixture in
            let tokens = SendServiceFixture.tokens(50)
            let batch = fixture.batch(tokens)
            try await fixture.run { _ in
                try await fixture.publish(batch)
                let events = try await fixture.events(1)
                #expect(events.map(\.routingKey) == ["delivered"])
                #expect(events.first?.count == 50 && events.first?.batchID == batch.batchID && events.first?.requestID == batch.requestID)
                #expect(Set(try await fixture.deliveriesByToken().keys) == Set(tokens))

                // The same batch again, as after a crash before its ack: nothing is sent twice.
                try await fixture.publish(batch)
                let again = try await fixture.events(1)
                #expect(again.first?.count == 50, "reported delivered (earlier)")
                #expect(try await fixture.acceptedCount() == 50)
            }
            #expect(try await fixture.messages(in: fixture.names.send.name) == 0)
            #expect(try await fixture.messages(in: fixture.names.dead) == 0)
            let delivery = try #require(
                try await fixture.sandbox.admin("GET", "/deliveries?token=\(tokens[0])").json?["deliveries"] as? [[String: Any]]
            ).first
            let headers = delivery?["headers"] as? [String: Any]
            #expect(headers?["apns-topic"] as? String == fixture.app)
            #expect(headers?["apns-push-type"] as? String == "alert")
            #expect(headers?["apns-priority"] as? String == "10")
            #expect(headers?["apns-collapse-id"] as? String == batch.requestID, "a twin would replace the first on the device")
        }
    }

    /// Found by `make chaos` (Redis kill -9 in the middle of a fan-out): push-render resumed from an
    /// older cursor and made batches whose ids had been used for other tokens; read by batch id alone,
    /// the first batch's marks skipped the second's tokens, which were never sent.
    @Test func aBatchIDReusedForOtherTokensSkipsNothing() async throws {
        try await withSendService("reused-id") { fixture in
            let first = fixture.batch(SendServiceFixture.tokens(20), requestID: "resumed-request", sequence: 7)
            let second = fixture.batch(SendServiceFixture.tokens(20), requestID: "resumed-request", sequence: 7)
            #expect(first.batchID == second.batchID)
            try await fixture.run { _ in
                try await fixture.publish(first)
                _ = try await fixture.events(untilDelivered: 20)
                try await fixture.publish(second)
                _ = try await fixture.events(untilDelivered: 20)
            }
            #expect(Set(try await fixture.deliveriesByToken().keys) == Set(first.tokens + second.tokens), "every token of both batches sent")
        }
    }

    @Test func anAppCanTurnDerivedCollapseIDsOffAndABatchsOwnIDWins() async throws {
        try await withSendService("nocollapse", delivery: .init(collapseIDFromRequest: false)) { fixture in
            let plain = fixture.batch(SendServiceFixture.tokens(1))
            var named = fixture.batch(SendServiceFixture.tokens(1))
            named.collapseID = "score-update"
            try await fixture.run { _ in
                try await fixture.publish([plain, named])
                _ = try await fixture.events(untilDelivered: 2)
            }
            let headers = { (token: String) async throws -> [String: Any]? in
                try #require(try await fixture.sandbox.admin("GET", "/deliveries?token=\(token)").json?["deliveries"] as? [[String: Any]]).first?[
                    "headers"] as? [String: Any]
            }
            #expect(try await headers(plain.tokens[0])?["apns-collapse-id"] == nil)
            #expect(try await headers(named.tokens[0])?["apns-collapse-id"] as? String == "score-update")
        }
    }

    @Test func atMostOnceReportsClaimedButUnansweredTokensAsUnknownInsteadOfSendingThem() async throws {
        try await withSendService("atmostonce", delivery: .init(guarantee: .atMostOnce)) { fixture in
            let tokens = SendServiceFixture.tokens(10)
            let batch = fixture.batch(tokens)
            let ledger = DeliveryLedger(redis: fixture.redis, ttl: .seconds(300))
            let key = ledger.key(app: fixture.app, markSet: batch.effectiveMarkSet)
            // What a kill -9 leaves: tokens 0 and 1 handed to APNs without an answer recorded, token 2
            // accepted and marked.
            try await ledger.write(
                [
                    (key, DeliveryMarks.claimedBit(slot: 0)), (key, DeliveryMarks.claimedBit(slot: 1)), (key, DeliveryMarks.claimedBit(slot: 2)),
                    (key, DeliveryMarks.acceptedBit(slot: 2)),
                ], value: true)
            try await fixture.run { _ in
                try await fixture.publish(batch)
                let events = try await fixture.events(2)
                #expect(events.first { $0.routingKey == "delivered" }?.count == 8, "7 sent now, 1 before")
                #expect(events.first { $0.routingKey == "failed.Unknown" }?.tokens == [tokens[0], tokens[1]])
            }
            #expect(Set(try await fixture.deliveriesByToken().keys) == Set(tokens[3...]), "neither the unknown nor the accepted ones went out")
            let marks = try await ledger.marks(key: key)
            #expect((0..<10).filter { marks.isClaimed(slot: $0) } == Array(0..<10), "each was claimed before it went out")
            #expect((0..<10).filter { marks.isAccepted(slot: $0) } == Array(2..<10))
            #expect(try await fixture.messages(in: fixture.names.send.name) == 0)
        }
    }

    @Test func atMostOnceRetriesWhatAPNsRefusedAndReleasesItsClaims() async throws {
        try await withSendService("atmostonce-retry", delivery: .init(guarantee: .atMostOnce)) { fixture in
            try await fixture.setFault(#"{"status": 503, "rate": 1.0, "reason": "Shutdown"}"#)
            let tokens = SendServiceFixture.tokens(6)
            try await fixture.run { _ in
                try await fixture.publish(fixture.batch(tokens))
                try await eventually("the first try is refused") {
                    number((try await fixture.stats()["by_status"] as? [String: Any])?["503"]) == 6
                }
                _ = try await fixture.sandbox.admin("DELETE", "/faults")
                // A refusal is a known answer: the retry sends them, it does not report them Unknown.
                let untilDelivered = try await fixture.events(untilDelivered: 6, timeout: .seconds(20))
                #expect(try await fixture.deliveriesByToken().count == 6)
                try await Task.sleep(for: .milliseconds(300))
                let events = untilDelivered + fixture.eventLog.takeAll()
                #expect(events.contains { $0.event == "delivered" })
                #expect(events.allSatisfy { $0.routingKey != "failed.Unknown" }, "\(events.map(\.routingKey))")
            }
        }
    }

    @Test func invalidTokensGoToFeedbackAndEventsAndPermanentFailuresToTheDeadQueue() async throws {
        try await withSendService("invalid") { fixture in
            let tokens = SendServiceFixture.tokens(5)
            try await fixture.setToken(tokens[0], #"{"state": "unregistered", "timestamp": 1767000000123}"#)
            try await fixture.setToken(tokens[1], #"{"state": "bad"}"#)
            // Two dead tokens and a good one; and a payload that is not a JSON object, which the
            // sandbox refuses (400 PayloadEmpty) whatever the token.
            let mixed = fixture.batch([tokens[0], tokens[1], tokens[3]])
            let broken = fixture.batch([tokens[2], tokens[4]], payload: "[1]")
            try await fixture.run { _ in
                try await fixture.publish(mixed)
                try await fixture.publish(broken)
                let feedback = try await fixture.receive(from: fixture.names.feedback.name, count: 2).map {
                    try JSONDecoder().decode(FeedbackEvent.self, from: Data($0.body))
                }
                let byToken = Dictionary(uniqueKeysWithValues: feedback.map { ($0.token, $0) })
                #expect(byToken[tokens[0]]?.reason == "Unregistered")
                #expect(byToken[tokens[0]]?.timestamp == 1_767_000_000_123)
                #expect(byToken[tokens[1]]?.reason == "BadDeviceToken")
                #expect(byToken[tokens[1]]?.timestamp == nil)
                #expect(byToken.values.allSatisfy { $0.app == fixture.app && $0.reportedAt > 1_767_000_000_000 })

                let dead = try await fixture.receive(from: fixture.names.dead, count: 1)
                let deadBatch = try JSONDecoder().decode(SendBatch.self, from: Data(dead[0].body))
                #expect(deadBatch.tokens == [tokens[2], tokens[4]], "the tokens that failed for good")
                #expect(deadBatch.requestID == broken.requestID && deadBatch.payload == "[1]")
                let reason = dead[0].properties.headers[PushQueues.errorHeader]?.stringValue ?? ""
                #expect(reason.hasPrefix("PayloadEmpty: "), "\(reason)")

                let events = try await fixture.events(4)
                #expect(Set(events.map(\.routingKey)) == ["delivered", "failed.Unregistered", "failed.BadDeviceToken", "failed.PayloadEmpty"])
                #expect(events.first { $0.routingKey == "failed.PayloadEmpty" }?.tokens == [tokens[2], tokens[4]])
                #expect(events.first { $0.routingKey == "failed.Unregistered" }?.tokens == [tokens[0]])
                #expect(events.first { $0.routingKey == "delivered" }?.count == 1)
            }
            #expect(try await fixture.messages(in: fixture.names.send.name) == 0)
        }
    }

    @Test func retryableFailuresGoThroughGrowingTiersUntilAttemptsRunOut() async throws {
        try await withSendService("retries", send: SendConfiguration(prefetch: 10, maxAttempts: 3, drainTimeout: .seconds(5))) { fixture in
            // 503 Shutdown: the server is going away, so the tiers start at 1 s.
            try await fixture.setFault(#"{"status": 503, "rate": 1.0, "reason": "Shutdown"}"#)
            let tokens = SendServiceFixture.tokens(2)
            try await fixture.run { _ in
                let published = ContinuousClock.now
                try await fixture.publish(fixture.batch(tokens))
                // Try 1 → the 1 s tier → try 2 → the 5 s tier → try 3 → given up.
                let dead = try await fixture.receive(from: fixture.names.dead, count: 1, timeout: .seconds(40))
                let elapsed = ContinuousClock.now - published
                #expect(elapsed >= .seconds(6), "the tiers' delays were honoured: \(elapsed)")
                let deadBatch = try JSONDecoder().decode(SendBatch.self, from: Data(dead[0].body))
                #expect(Set(deadBatch.tokens) == Set(tokens) && deadBatch.attempt == 2)
                #expect(
                    dead[0].properties.headers[PushQueues.errorHeader]?.stringValue?.hasPrefix("Shutdown: gave up after 3 attempts") == true
                )
                let stats = try await fixture.stats()
                #expect(number((stats["by_status"] as? [String: Any])?["503"]) == 6, "three tries of two tokens: \(stats)")
                let events = try await fixture.events(1)
                #expect(events.first?.routingKey == "failed.Shutdown" && events.first?.count == 2)
            }
        }
    }

    /// Apple: `TooManyRequests` may be retried "with a delay"; push-send waits at least 30 s.
    @Test func aTooManyRequestsAnswerIsRetriedAfterThirtySeconds() async throws {
        try await withSendService("recover") { fixture in
            try await fixture.setFault(#"{"status": 429, "rate": 1.0}"#)
            let tokens = SendServiceFixture.tokens(20)
            try await fixture.run { _ in
                let published = ContinuousClock.now
                try await fixture.publish(fixture.batch(tokens))
                try await eventually("the first try is refused") {
                    number((try await fixture.stats()["by_status"] as? [String: Any])?["429"]) == 20
                }
                _ = try await fixture.sandbox.admin("DELETE", "/faults")
                try await eventually("waiting in the 30 s tier") {
                    try await fixture.messages(in: fixture.names.send.retryQueue(tier: 2)) == 1
                }
                _ = try await fixture.events(untilDelivered: 20, timeout: .seconds(50))
                let elapsed = ContinuousClock.now - published
                #expect(elapsed >= .seconds(29), "not before the 30 s tier: \(elapsed)")
                #expect(try await fixture.deliveriesByToken().count == 20)
            }
        }
    }

    /// Apple: a 5xx may be retried after 15 minutes. Both 500 and 503 `ServiceUnavailable` wait in the
    /// 15 min tier; `PUSH_SEND_SERVER_ERROR_RETRY_S` shortens that wait.
    @Test func serverErrorsWaitFifteenMinutesUnlessConfiguredShorter() async throws {
        try await withSendService("server-errors") { fixture in
            try await fixture.setFault(#"{"status": 500, "rate": 1.0}"#)
            try await fixture.run { _ in
                try await fixture.publish(fixture.batch(SendServiceFixture.tokens(2)))
                try await eventually("the 500 sends it to the 15 min tier") {
                    try await fixture.messages(in: fixture.names.send.retryQueue(tier: 5)) == 1
                }
                try await fixture.setFault(#"{"status": 500, "rate": 0}"#)
                try await fixture.setFault(#"{"status": 503, "rate": 1.0}"#)
                try await fixture.publish(fixture.batch(SendServiceFixture.tokens(3)))
                try await eventually("the 503 ServiceUnavailable too") {
                    try await fixture.messages(in: fixture.names.send.retryQueue(tier: 5)) == 2
                }
                for tier in 0..<5 {
                    #expect(try await fixture.messages(in: fixture.names.send.retryQueue(tier: tier)) == 0)
                }
            }
        }
        let shorter = SendConfiguration(prefetch: 20, drainTimeout: .seconds(5), serverErrorRetry: .seconds(5))
        try await withSendService("server-errors-5s", send: shorter) { fixture in
            try await fixture.setFault(#"{"status": 500, "rate": 1.0}"#)
            let tokens = SendServiceFixture.tokens(4)
            try await fixture.run { _ in
                let published = ContinuousClock.now
                try await fixture.publish(fixture.batch(tokens))
                try await eventually("the first try is refused") {
                    number((try await fixture.stats()["by_status"] as? [String: Any])?["500"]) == 4
                }
                _ = try await fixture.sandbox.admin("DELETE", "/faults")
                _ = try await fixture.events(untilDelivered: 4, timeout: .seconds(20))
                let elapsed = ContinuousClock.now - published
                #expect(elapsed >= .seconds(5), "the 5 s tier, not the 1 s one: \(elapsed)")
                #expect(try await fixture.deliveriesByToken().count == 4)
            }
        }
    }

    @Test func expirationIsHonouredBeforeSendingAndWhenRetrying() async throws {
        try await withSendService("expiration") { fixture in
            let now = Int64(Date().timeIntervalSince1970)
            let stale = fixture.batch(SendServiceFixture.tokens(3), expiration: now - 10)
            let tryOnce = fixture.batch(SendServiceFixture.tokens(2), expiration: 0)
            let soon = fixture.batch(SendServiceFixture.tokens(2), expiration: now + 4)
            try await fixture.setFault(#"{"status": 503, "rate": 1.0, "reason": "Shutdown"}"#)
            try await fixture.run { _ in
                try await fixture.publish([stale, tryOnce, soon])
                // stale: never sent; tryOnce: one try; soon: a try, a retry after 1 s, and then the
                // 5 s tier would outlive the expiration.
                var expired: [String: Int] = [:]
                for event in try await fixture.events(3) where event.routingKey == "failed.Expired" {
                    expired[event.requestID ?? "", default: 0] += event.count ?? 0
                }
                #expect(expired == [stale.requestID: 3, tryOnce.requestID: 2, soon.requestID: 2])
                let stats = try await fixture.stats()
                #expect(number((stats["by_status"] as? [String: Any])?["503"]) == 2 + 4, "\(stats)")
            }
            #expect(try await fixture.messages(in: fixture.names.dead) == 0)
            for tier in fixture.names.send.retryQueues.map(\.name) {
                #expect(try await fixture.messages(in: tier) == 0, "\(tier)")
            }
        }
    }

    @Test func anAppRateLimitDefersThenDelivers() async throws {
        try await withSendService("ratelimit", rateLimits: .init(perDevicePerHour: 100, perAppPerSecond: 100)) { fixture in
            let tokens = SendServiceFixture.tokens(300)
            try await fixture.run { _ in
                let published = ContinuousClock.now
                try await fixture.publish(fixture.batch(tokens))
                let events = try await fixture.events(untilDelivered: 300, timeout: .seconds(60))
                #expect(events.allSatisfy { $0.event == "delivered" }, "\(events.map(\.routingKey))")
                #expect(events.count >= 2, "deferred tokens came back in later batches")
                #expect(ContinuousClock.now - published >= .seconds(1), "deferred through a tier")
                let counts = try await fixture.deliveriesByToken()
                #expect(counts.count == 300 && counts.values.allSatisfy { $0 == 1 })
            }
            #expect(try await fixture.messages(in: fixture.names.dead) == 0)
        }
    }

    @Test func aDeviceLimitDefersToALongTierOrDropsLowPriorityWhenTheAppSaysSo() async throws {
        let dropping = TestServers.uniqueName("com.test.send-drop")
        try await withSendService(
            "devicelimit",
            rateLimits: .init(perDevicePerHour: 1, perAppPerSecond: 1000),
            extraApps: { directory in
                [
                    AppConfiguration(
                        bundleID: dropping,
                        apns: .token(.init(keyFile: try SendTestKeys.write(in: directory), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")),
                        rateLimits: .init(perDevicePerHour: 1, perAppPerSecond: 1000, dropLowPriority: true)
                    )
                ]
            }
        ) { fixture in
            let token = TestTokens.random()
            try await fixture.run { _ in
                try await fixture.publish(fixture.batch([token], priority: 5))
                try await fixture.publish(fixture.batch([token], app: dropping, priority: 1))
                _ = try await fixture.events(untilDelivered: 2)
                // A second notification for the same device within the hour.
                try await fixture.publish(fixture.batch([token], priority: 5))
                try await fixture.publish(fixture.batch([token], app: dropping, priority: 1))
                let events = try await fixture.events(1)
                #expect(events.first?.routingKey == "failed.RateLimited" && events.first?.app == dropping)
                let longest = fixture.names.send.retryQueue(tier: fixture.names.send.retryTiers.count - 1)
                try await eventually("the deferred notification waits in \(longest)") {
                    try await fixture.messages(in: longest) == 1
                }
                let deferred = try await fixture.receive(from: longest, count: 1)
                let batch = try JSONDecoder().decode(SendBatch.self, from: Data(deferred[0].body))
                #expect(batch.tokens == [token] && batch.attempt == 0 && batch.app == fixture.app)
                #expect(deferred[0].properties.headers[SendBatchPlan.deferralsHeader]?.intValue == 1)
            }
            #expect(try await fixture.deliveriesByToken().count == 1)
            #expect(try await fixture.deliveriesByToken(app: dropping).count == 1)
        }
    }

    @Test func refusedCredentialsPauseOnlyThatAppAndKeepItsBatches() async throws {
        let refused = TestServers.uniqueName("com.test.send-refused")
        try await withSendService(
            "credentials",
            send: SendConfiguration(prefetch: 20, drainTimeout: .seconds(5), credentialPause: .seconds(30)),
            // The sandbox verifies key id ABC123DEFG against the main key; the refused app signs with another.
            sandboxArguments: { _ in ["--public-key", "ABC123DEFG=\(SendTestKeys.publicKeyPEM)"] },
            extraApps: { directory in
                [
                    AppConfiguration(
                        bundleID: refused,
                        apns: .token(
                            .init(
                                keyFile: try SendTestKeys.write(SendTestKeys.otherP8, name: "Other.p8", in: directory), keyID: "ABC123DEFG",
                                teamID: "DEF123GHIJ"))
                    )
                ]
            }
        ) { fixture in
            let tokens = SendServiceFixture.tokens(10)
            try await fixture.run { _ in
                try await fixture.publish(fixture.batch(Array(tokens[0..<5]), app: refused))
                // 30 s pause → the batch waits in the 30 s tier.
                let tier = fixture.names.send.retryQueue(tier: 2)
                try await eventually("the refused app's batch waits in \(tier)") {
                    try await fixture.messages(in: tier) == 1
                }
                // While it is paused its new batches are not even tried, and the other app flows.
                let before = try await fixture.stats()["requests"]
                try await fixture.publish(fixture.batch(Array(tokens[5..<10]), app: refused))
                try await fixture.publish(fixture.batch(Array(tokens[0..<5])))
                _ = try await fixture.events(untilDelivered: 5)
                try await eventually("both refused batches wait") {
                    try await fixture.messages(in: tier) == 2
                }
                #expect(number(try await fixture.stats()["requests"]) == number(before).map { $0 + 5 }, "only the good app's 5 were sent")
                let waiting = try await fixture.receive(from: tier, count: 2)
                let held = try waiting.flatMap { try JSONDecoder().decode(SendBatch.self, from: Data($0.body)).tokens }
                #expect(Set(held) == Set(tokens), "nothing of the paused app is lost")
            }
            #expect(try await fixture.deliveriesByToken(app: refused).isEmpty)
            #expect(try await fixture.messages(in: fixture.names.dead) == 0)
        }
    }

    @Test func gracefulShutdownReturnsUnfinishedBatchesAndLosesNothing() async throws {
        try await withSendService("drain", send: SendConfiguration(prefetch: 4, drainTimeout: .seconds(1))) { fixture in
            // Slow answers: 2 s each, so batches are still in flight at shutdown and the 1 s drain ends first.
            try await fixture.setFault(#"{"delay_ms": 2000}"#)
            let tokens = SendServiceFixture.tokens(400)
            try await fixture.publish(stride(from: 0, to: 400, by: 50).map { fixture.batch(Array(tokens[$0..<$0 + 50]), sequence: $0) })
            try await fixture.run { _ in
                try await eventually("requests reach the sandbox") {
                    number(try await fixture.stats()["requests"]) ?? 0 > 0
                }
            }
            try await eventually("the unfinished batches are back in \(fixture.names.send.name)") {
                try await fixture.messages(in: fixture.names.send.name) == 8
            }
            // Run again without the delay: everything is delivered, what was accepted before is not sent again.
            _ = try await fixture.sandbox.admin("DELETE", "/faults")
            try await fixture.run { _ in
                try await eventually("every token delivered", timeout: .seconds(60)) {
                    try await fixture.deliveriesByToken().count == 400
                }
            }
            let accepted = try await fixture.acceptedCount()
            #expect(accepted - 400 <= 200, "at most the four batches in flight at shutdown could repeat: \(accepted)")
        }
    }
}
