import Foundation
import RateLimiting
import Redis
import TestSupport
import Testing

/// The GCRA arithmetic alone, with a hand-driven clock (µs).
@Suite("GCRA arithmetic")
struct GCRATests {
    @Test func anIdleKeyTakesTheBurstThenOneUnitPerInterval() {
        let gcra = GCRA(limit: 5, period: .seconds(1))
        #expect(gcra.interval == 200_000)
        #expect(gcra.tolerance == 1_000_000)
        var tat: Int64? = nil
        let now: Int64 = 1_700_000_000_000_000
        for expected in [4, 3, 2, 1, 0] {
            let (decision, newTAT) = gcra.decide(tat: tat, now: now)
            #expect(decision == .allowed(remaining: expected))
            tat = newTAT
        }
        let (refused, unchanged) = gcra.decide(tat: tat, now: now)
        #expect(refused == .limited(retryAfter: .milliseconds(200)))
        #expect(unchanged == nil)
        // Half an interval later it is still refused, for the other half.
        #expect(gcra.decide(tat: tat, now: now + 100_000).decision == .limited(retryAfter: .milliseconds(100)))
        // One interval later exactly one more fits.
        let (later, laterTAT) = gcra.decide(tat: tat, now: now + 200_000)
        #expect(later == .allowed(remaining: 0))
        // After a full period of silence the whole burst is back.
        #expect(gcra.decide(tat: laterTAT, now: now + 1_200_000).decision == .allowed(remaining: 4))
    }

    @Test func burstAndCostChangeTheAllowance() {
        let gcra = GCRA(limit: 60, period: .seconds(3600), burst: 3)
        #expect(gcra.interval == 60_000_000)
        let now: Int64 = 1_000_000_000
        let (first, tat) = gcra.decide(tat: nil, now: now, cost: 2)
        #expect(first == .allowed(remaining: 1))
        let (second, _) = gcra.decide(tat: tat, now: now, cost: 2)
        #expect(second == .limited(retryAfter: .seconds(60)))
        // A cost-0 probe spends nothing.
        let (probe, probeTAT) = gcra.decide(tat: tat, now: now, cost: 0)
        #expect(probe == .allowed(remaining: 1))
        #expect(probeTAT == tat)
        #expect(gcra.decide(tat: nil, now: now, cost: 0).newTAT == nil)
    }

    @Test func aRateFasterThanAMicrosecondStillMoves() {
        let gcra = GCRA(limit: 10_000_000, period: .seconds(1))
        #expect(gcra.interval == 1)
    }
}

/// Against the shared test Redis; fails when it is not running.
@Suite("Rate limiter against a real Redis", .timeLimit(.minutes(1)))
struct RateLimiterTests {
    @Test func severalLimitsInOnePipelineAreDecidedAndSpentEachOnItsOwn() async throws {
        let redis = try await RegistryTesting.client()
        let limiter = RateLimiter(redis: redis)
        let scope = TestServers.uniqueName("multi")
        let tight = RateLimit(key: "push:ratelimit:{\(scope)}:tight", limit: 2, period: .seconds(3600))
        let loose = RateLimit(key: "push:ratelimit:{\(scope)}:loose", limit: 100, period: .seconds(3600))
        #expect(try await limiter.check([tight, loose]) == [.allowed(remaining: 1), .allowed(remaining: 99)])
        #expect(try await limiter.check([tight, loose]) == [.allowed(remaining: 0), .allowed(remaining: 98)])
        // The tight one refuses; the loose one still spends, as two separate checks would.
        let third = try await limiter.check([tight, loose])
        #expect(!third[0].isAllowed)
        #expect(third[1] == .allowed(remaining: 97))
        #expect(try await limiter.check(key: loose.key, limit: 100, period: .seconds(3600), cost: 0) == .allowed(remaining: 97))
        #expect(try await limiter.check([]) == [])

        // After SCRIPT FLUSH (as after a Redis restart) the script is loaded again and the checks run once.
        try await redis.execute("SCRIPT", "FLUSH")
        #expect(try await limiter.check([loose]) == [.allowed(remaining: 96)])
        try await redis.execute("DEL", tight.key, loose.key)
        await redis.close()
    }

    /// Checks with different limits, one empty and one longer than a script call takes, decided in
    /// calls of their own and in combined calls: the same decisions, each in its check's order.
    @Test func combinedBatchCallsDecideAsSeparateOnes() async throws {
        let redis = try await RegistryTesting.client()
        let limiter = RateLimiter(redis: redis)
        func checks(_ scope: String) -> [BatchRateLimit] {
            [
                BatchRateLimit(
                    sharedKey: "push:ratelimit:{\(scope)}:a", sharedLimit: 3, sharedPeriod: .seconds(3600),
                    itemKeys: (0..<5).map { "push:ratelimit:{\(scope)}:a:\($0 % 4)" }, itemLimit: 1, itemPeriod: .seconds(3600)),
                BatchRateLimit(
                    sharedKey: "push:ratelimit:{\(scope)}:b", sharedLimit: 100, sharedPeriod: .seconds(3600),
                    itemKeys: [], itemLimit: 1, itemPeriod: .seconds(3600)),
                BatchRateLimit(
                    sharedKey: "push:ratelimit:{\(scope)}:d", sharedLimit: 10, sharedPeriod: .seconds(60),
                    itemKeys: (0..<50).map { "push:ratelimit:{\(scope)}:d:\($0)" }, itemLimit: 5, itemPeriod: .seconds(3600)),
                BatchRateLimit(
                    sharedKey: "push:ratelimit:{\(scope)}:c", sharedLimit: 1200, sharedPeriod: .seconds(3600),
                    itemKeys: (0..<1500).map { "push:ratelimit:{\(scope)}:c:\($0)" }, itemLimit: 2, itemPeriod: .seconds(3600)),
            ]
        }
        let separateScope = TestServers.uniqueName("separate")
        let combinedScope = TestServers.uniqueName("combined")
        let separate = try await limiter.checkBatches(checks(separateScope), sameNode: false)
        let combined = try await limiter.checkBatches(checks(combinedScope), sameNode: true)
        // Combined: a and d in one call, then c's two parts (1,000 item keys at most a call).
        #expect(separate.map(\.count) == [5, 0, 50, 1500])
        #expect(combined.map(\.count) == [5, 0, 50, 1500])
        // a: items 0-2 pass (the shared burst of 3), item 3 is refused by the shared allowance, and
        // item 4 (key 0 again) by its own.
        #expect(combined[0].map(\.isAllowed) == [true, true, true, false, false])
        // d: its shared burst of 10 passes, with 4 of 5 left each; the rest wait 6 s more each.
        #expect(combined[2].prefix(10).allSatisfy { $0 == .allowed(remaining: 4) })
        #expect(combined[2].dropFirst(10).allSatisfy { !$0.isAllowed })
        // c: the first 1200 pass with one of 2 left each, the rest wait for the shared allowance.
        #expect(combined[3].prefix(1200).allSatisfy { $0 == .allowed(remaining: 1) })
        #expect(!combined[3][1200].isAllowed && !combined[3][1499].isAllowed)
        for (index, (one, other)) in zip(separate, combined).enumerated() {
            #expect(one.map(\.isAllowed) == other.map(\.isAllowed), "check \(index)")
            for (left, right) in zip(one, other) {
                switch (left, right) {
                case (.allowed(let a), .allowed(let b)): #expect(a == b)
                case (.limited(let a), .limited(let b)): #expect(a - b < .seconds(5) && b - a < .seconds(5), "retry-after \(a) and \(b)")
                default: break
                }
            }
        }
        for scope in [separateScope, combinedScope] { _ = try await redis.deleteKeys(matching: "push:ratelimit:{\(scope)}:*") }
        await redis.close()
    }

    @Test func aBurstOfTheLimitIsAllowedThenLimitedUntilRetryAfter() async throws {
        let redis = try await RegistryTesting.client()
        let limiter = RateLimiter(redis: redis)
        let key = "push:ratelimit:{\(TestServers.uniqueName("limit"))}:client"
        // 5 per 100 s: one unit comes back every 20 s, far longer than six calls take even on a busy
        // machine, so the exact counts below do not depend on timing.
        let period: Duration = .seconds(100)

        for expected in (0..<5).reversed() {
            #expect(try await limiter.check(key: key, limit: 5, period: period) == .allowed(remaining: expected))
        }
        let decision = try await limiter.check(key: key, limit: 5, period: period)
        guard case .limited(let retryAfter) = decision else {
            Issue.record("the sixth request within the period should be limited, got \(decision)")
            return
        }
        // One unit comes back every 20 s; some of that passed while the first five ran.
        #expect(retryAfter > .seconds(15) && retryAfter <= .seconds(20), "retry after \(retryAfter)")
        // The key expires when its state would be idle again: within the period.
        let ttl = try #require(try await redis.execute("PTTL", key).integer)
        #expect(ttl > 90_000 && ttl <= 100_000, "PTTL \(ttl)")
        try await redis.execute("DEL", key)
        await redis.close()
    }

    @Test func theAllowanceComesBackAfterRetryAfter() async throws {
        let redis = try await RegistryTesting.client()
        let limiter = RateLimiter(redis: redis)
        let key = "push:ratelimit:{\(TestServers.uniqueName("refill"))}:client"
        #expect(try await limiter.check(key: key, limit: 1, period: .seconds(1)).isAllowed)
        switch try await limiter.check(key: key, limit: 1, period: .seconds(1)) {
        case .limited(let retryAfter):
            #expect(retryAfter > .zero && retryAfter <= .seconds(1), "retry after \(retryAfter)")
            try await Task.sleep(for: retryAfter + .milliseconds(20))
        case .allowed:
            // More than a second passed between the calls (a very busy machine), so this one was
            // allowed and spent the unit: wait a whole period for the next.
            try await Task.sleep(for: .milliseconds(1020))
        }
        #expect(try await limiter.check(key: key, limit: 1, period: .seconds(1)).isAllowed)
        try await redis.execute("DEL", key)
        await redis.close()
    }

    @Test func separateKeysAreIndependent() async throws {
        let redis = try await RegistryTesting.client()
        let limiter = RateLimiter(redis: redis)
        let base = TestServers.uniqueName("independent")
        let first = "push:ratelimit:{\(base)}:a"
        let second = "push:ratelimit:{\(base)}:b"

        #expect(try await limiter.check(key: first, limit: 1, period: .seconds(60)) == .allowed(remaining: 0))
        let limited = try await limiter.check(key: first, limit: 1, period: .seconds(60))
        if case .limited(let retryAfter) = limited {
            // Whatever time passed between the two calls (seconds on a busy machine) came off it.
            #expect(retryAfter > .seconds(50) && retryAfter <= .seconds(60), "retry after \(retryAfter)")
        } else {
            Issue.record("the second request within a minute should be limited, got \(limited)")
        }
        #expect(try await limiter.check(key: second, limit: 1, period: .seconds(60)) == .allowed(remaining: 0))

        try await redis.execute("DEL", first, second)
        await redis.close()
    }

    @Test func burstAndCostAreHonoured() async throws {
        let redis = try await RegistryTesting.client()
        let limiter = RateLimiter(redis: redis)
        let key = "push:ratelimit:{\(TestServers.uniqueName("burst"))}:client"

        // 60 per hour with bursts of 10: a cost of 8 leaves 2, a further 3 is refused, 2 fits.
        #expect(try await limiter.check(key: key, limit: 60, period: .seconds(3600), burst: 10, cost: 8) == .allowed(remaining: 2))
        #expect(try await limiter.check(key: key, limit: 60, period: .seconds(3600), burst: 10, cost: 3).isAllowed == false)
        #expect(try await limiter.check(key: key, limit: 60, period: .seconds(3600), burst: 10, cost: 2) == .allowed(remaining: 0))
        // The TTL is the time until idle: 10 units of a minute each.
        let ttl = try #require(try await redis.execute("PTTL", key).integer)
        #expect(ttl > 590_000 && ttl <= 600_000, "PTTL \(ttl)")

        try await redis.execute("DEL", key)
        await redis.close()
    }

    @Test func manyClientsAtOnceGetExactlyTheBurst() async throws {
        let redis = try await RegistryTesting.client()
        let limiter = RateLimiter(redis: redis)
        let key = "push:ratelimit:{\(TestServers.uniqueName("race"))}:client"

        let allowed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<200 {
                group.addTask { try await limiter.check(key: key, limit: 50, period: .seconds(3600)).isAllowed }
            }
            var allowed = 0
            for try await isAllowed in group where isAllowed { allowed += 1 }
            return allowed
        }
        #expect(allowed == 50)

        try await redis.execute("DEL", key)
        await redis.close()
    }
}
