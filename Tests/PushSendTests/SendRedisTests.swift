import PushCore
import RateLimiting
import Redis
import Testing
import TestSupport

@testable import PushSend

/// Dedupe marks and batch rate limits against the shared test Redis (`TestServers.redisURL`); each
/// test uses its own app id, and removes its keys.
@Suite("push-send's Redis parts against real Redis", .timeLimit(.minutes(2)))
struct SendRedisTests {
    @Test func acceptedNotificationsAreRememberedPerRequestWithATTL() async throws {
        try await withSendRedis { redis, app in
            let ledger = DeliveryLedger(redis: redis, ttl: .seconds(120))
            let tokens = (0..<2500).map { SendBatchReportTests.token($0) }
            #expect(try await ledger.accepted(app: app, requestID: "r1", tokens: tokens).isEmpty)
            try await ledger.markAccepted(app: app, requestID: "r1", tokens: Array(tokens[100..<1300]))
            let accepted = try await ledger.accepted(app: app, requestID: "r1", tokens: tokens)
            #expect(accepted == Set(tokens[100..<1300]), "across MGET chunks")
            #expect(try await ledger.accepted(app: app, requestID: "r2", tokens: tokens).isEmpty, "another request is another notification")
            let key = ledger.key(app: app, requestID: "r1", token: tokens[100])
            #expect(key == "push:{\(app)}:sent:r1:\(tokens[100])")
            let ttl = try await redis.execute("TTL", key).integer ?? -1
            #expect((100...120).contains(ttl), "TTL \(ttl)")
        }
    }

    @Test func theAppLimitLetsABurstThroughAndSpreadsTheRest() async throws {
        try await withSendRedis { redis, app in
            let limits = SendRateLimits(redis: redis)
            let configuration = AppConfiguration(
                bundleID: app,
                apns: .token(.init(keyFile: "k.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")),
                rateLimits: .init(perDevicePerHour: 60, perAppPerSecond: 100)
            )
            let tokens = (0..<300).map { SendBatchReportTests.token($0) }
            // Taken before the check: the script reads Redis's clock somewhere after this, so the
            // time measured from here is never less than the refill time.
            let firstChecked = ContinuousClock.now
            let decisions = try await limits.check(app: configuration, tokens: tokens)
            #expect(decisions.count == 300)
            #expect(decisions.prefix(100).allSatisfy { $0.isAllowed }, "a burst of one second's worth")
            let waits = decisions.dropFirst(100).compactMap { decision -> Duration? in
                if case .limited(let wait) = decision { return wait }
                return nil
            }
            #expect(waits.count == 200)
            #expect(waits.first! > .zero && waits.first! <= .milliseconds(50))
            #expect(waits.last! > .milliseconds(1900) && waits.last! <= .milliseconds(2100), "the 200th waits two seconds: \(waits.last!)")
            #expect(zip(waits, waits.dropFirst()).allSatisfy { $0 < $1 }, "spread out, in order")
            // The allowance refills at 100/s: of 100 more, at most what refilled since passes now
            // (however slowly a busy machine got here).
            let again = try await limits.check(app: configuration, tokens: Array(tokens[200..<300]))
            let elapsed = ContinuousClock.now - firstChecked
            let refilled = Int((Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) * 100) + 2
            #expect(again.filter(\.isAllowed).count <= min(refilled, 99), "\(again.filter(\.isAllowed).count) allowed after \(elapsed)")
        }
    }

    @Test func theDeviceLimitHoldsPerTokenAcrossBatches() async throws {
        try await withSendRedis { redis, app in
            let limits = SendRateLimits(redis: redis)
            let configuration = AppConfiguration(
                bundleID: app,
                apns: .token(.init(keyFile: "k.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")),
                rateLimits: .init(perDevicePerHour: 2, perAppPerSecond: 10_000)
            )
            let a = SendBatchReportTests.token(1)
            let b = SendBatchReportTests.token(2)
            let first = try await limits.check(app: configuration, tokens: [a, b])
            #expect(first.allSatisfy { $0.isAllowed })
            let second = try await limits.check(app: configuration, tokens: [a])
            #expect(second.allSatisfy { $0.isAllowed }, "a burst of 2")
            let third = try await limits.check(app: configuration, tokens: [a, b])
            #expect(third[1].isAllowed)
            guard case .limited(let wait) = third[0] else {
                Issue.record("a third notification within the hour is limited")
                return
            }
            #expect(wait > .seconds(1700) && wait <= .seconds(1800), "one every 30 min: \(wait)")
        }
    }
}

/// A connected Redis client and a unique app id; deletes the app's keys afterwards.
func withSendRedis(_ body: (RedisClient, String) async throws -> Void) async throws {
    let redis = try await RedisClient.connect(
        configuration: RedisConfiguration(url: TestServers.redisURL, source: "PUSH_TEST_REDIS_URL"),
        logger: sendTestLogger
    )
    let app = TestServers.uniqueName("com.test.send-redis")
    var failure: (any Error)?
    do {
        try await body(redis, app)
    } catch {
        failure = error
    }
    await deleteSendKeys(redis: redis, app: app)
    await redis.close()
    if let failure { throw failure }
}

/// Removes every key of `app` (`push:{app}:*`).
func deleteSendKeys(redis: RedisClient, app: String) async {
    var cursor = "0"
    repeat {
        guard let reply = try? await redis.execute("SCAN", cursor, "MATCH", "push:{\(app)}:*", "COUNT", "1000"),
            let parts = reply.array, parts.count == 2, let next = parts[0].string
        else { return }
        let keys = parts[1].array?.compactMap(\.string) ?? []
        if !keys.isEmpty { _ = try? await redis.execute(RedisCommand(["UNLINK"] + keys)) }
        cursor = next
    } while cursor != "0"
}
