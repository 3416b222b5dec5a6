import PushCore
import RateLimiting
import Redis
import TestSupport
import Testing

@testable import PushSend

/// Dedupe marks and batch rate limits against the shared test Redis (`TestServers.redisURL`); each
/// test uses its own app id, and removes its keys.
@Suite("push-send's Redis parts against real Redis", .timeLimit(.minutes(2)))
struct SendRedisTests {
    @Test func marksAreBitsPerSlotInOneKeyPerMarkSetWithATTL() async throws {
        try await withSendRedis { redis, app in
            let ledger = DeliveryLedger(redis: redis, ttl: .seconds(120))
            let key = ledger.key(app: app, markSet: "r1/0")
            #expect(key == "push:marks:{\(app):r1/0}", "each mark set its own hash tag")
            #expect(try await ledger.marks(key: key).isEmpty)
            // Accepted marks for slots 100..<1300 (across BITFIELD chunks), claims for 5 and 7.
            try await ledger.write((100..<1300).map { (key, DeliveryMarks.acceptedBit(slot: $0)) }, value: true)
            try await ledger.write([(key, DeliveryMarks.claimedBit(slot: 5)), (key, DeliveryMarks.claimedBit(slot: 7))], value: true)
            let marks = try await ledger.marks(key: key)
            #expect((0..<1400).filter { marks.isAccepted(slot: $0) } == Array(100..<1300))
            #expect((0..<1400).filter { marks.isClaimed(slot: $0) } == [5, 7])
            try await ledger.write([(key, DeliveryMarks.claimedBit(slot: 5))], value: false)
            let afterRelease = try await ledger.marks(key: key)
            #expect((0..<1400).filter { afterRelease.isClaimed(slot: $0) } == [7])
            #expect(afterRelease.isAccepted(slot: 100), "clearing a claim leaves the accepted marks")
            #expect(try await ledger.marks(key: ledger.key(app: app, markSet: "r2/0")).isEmpty, "another mark set")
            let ttl = try await redis.execute("TTL", key).integer ?? -1
            #expect((100...120).contains(ttl), "TTL \(ttl)")
        }
    }

    @Test func aBatchOfMarksCostsLessThan16BytesAToken() async throws {
        try await withSendRedis { redis, app in
            let ledger = DeliveryLedger(redis: redis, ttl: .seconds(120))
            // What a broadcast leaves: 20 batches of 500 tokens, every one accepted.
            let markSets = (0..<20).map { ledger.key(app: app, markSet: "broadcast-\(app)-with-a-realistic-request-id/\($0)") }
            try await ledger.write(markSets.flatMap { key in (0..<500).map { (key, DeliveryMarks.acceptedBit(slot: $0)) } }, value: true)
            var bytes: Int64 = 0
            for key in markSets { bytes += try await redis.execute("MEMORY", "USAGE", key).integer ?? 1_000_000 }
            let perToken = Double(bytes) / 10_000
            #expect(perToken <= 1.0, "\(perToken) bytes a token (target ≤ 16)")
        }
    }

    /// Both ways of calling the script: all shards in one call (a standalone Redis) and a call per
    /// shard (a Redis Cluster) decide the same.
    @Test(arguments: [true, false])
    func theAppLimitLetsABurstThroughAndSpreadsTheRest(combinesShards: Bool) async throws {
        try await withSendRedis { redis, app in
            #expect(SendRateLimits(redis: redis).combinesShards, "a single server combines by default")
            let limits = SendRateLimits(redis: redis, combinesShards: combinesShards)
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
            // The app's allowance is spread over 24 shards: each lets through its share of the
            // burst (⌈100/24⌉ = 5) and then one every 24/100 s, so together they admit 100/s.
            let allowed = decisions.filter(\.isAllowed).count
            #expect((90...120).contains(allowed), "about one second's worth at once: \(allowed)")
            let spread = SendRateLimits.spread(app: app)
            var shards: [Int: [RateLimitDecision]] = [:]
            for (token, decision) in zip(tokens, decisions) { shards[spread.index(of: token), default: []].append(decision) }
            #expect(shards.count == 24, "a batch's tokens reach every shard")
            for (shard, decisions) in shards {
                let burstPassed = decisions.prefix(5).allSatisfy { $0.isAllowed }
                #expect(burstPassed, "shard \(shard): its burst passes")
                for (index, decision) in decisions.dropFirst(5).enumerated() {
                    guard case .limited(let wait) = decision else {
                        Issue.record("shard \(shard): token \(index + 5) passed past the burst")
                        continue
                    }
                    // The k-th refused waits for k more of the shard's units, 240 ms each.
                    let expected = Double(index + 1) * 0.240
                    let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18
                    #expect(abs(seconds - expected) < 0.05, "shard \(shard): waits \(seconds) s, expected \(expected) s")
                }
            }
            // The allowance refills at 100/s in all: of 100 more, at most what refilled since passes
            // now (however slowly a busy machine got here), plus one rounding unit a shard.
            let again = try await limits.check(app: configuration, tokens: Array(tokens[200..<300]))
            let elapsed = ContinuousClock.now - firstChecked
            let refilled = Int((Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) * 100) + 24
            #expect(again.filter(\.isAllowed).count <= min(refilled, 99), "\(again.filter(\.isAllowed).count) allowed after \(elapsed)")
        }
    }

    @Test(arguments: [true, false])
    func theDeviceLimitHoldsPerTokenAcrossBatches(combinesShards: Bool) async throws {
        try await withSendRedis { redis, app in
            let limits = SendRateLimits(redis: redis, combinesShards: combinesShards)
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
    let redis = try await TestServers.connectRedis(logger: sendTestLogger)
    let app = TestServers.uniqueName("com.test.send-redis")
    try await withCleanUp {
        try await body(redis, app)
    } cleanUp: {
        _ = try? await redis.deleteKeys(matching: "push:{\(app)}:*")
        await redis.close()
    }
}
