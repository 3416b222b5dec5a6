import PushCore
import Testing

@testable import PushSend

/// Retry planning without servers: tiers by attempt, deferral tiers by wait, attempt and deferral
/// bounds, and expiration.
@Suite struct RetryPolicyTests {
    let policy = RetryPolicy(tiers: PushQueues.standard.send.retryTiers, maxAttempts: 4, maxDeferrals: 3)
    let now: Int64 = 1_767_225_000_000

    @Test func retriesGrowThroughTheTiersAndStopAtMaxAttempts() {
        #expect(policy.afterRetryableFailure(attempt: 0, expiration: nil, now: now) == .republish(tier: 0))
        #expect(policy.afterRetryableFailure(attempt: 1, expiration: nil, now: now) == .republish(tier: 1))
        #expect(policy.afterRetryableFailure(attempt: 2, expiration: nil, now: now) == .republish(tier: 2))
        #expect(policy.afterRetryableFailure(attempt: 3, expiration: nil, now: now) == .exhausted, "4 tries in all")
        let long = RetryPolicy(tiers: PushQueues.standard.send.retryTiers, maxAttempts: 20, maxDeferrals: 3)
        #expect(long.afterRetryableFailure(attempt: 12, expiration: nil, now: now) == .republish(tier: 4), "past the last tier it stays there")
    }

    @Test func aRetryNeverOutlivesTheExpiration() {
        let expiration = now / 1000 + 10
        // Tier 0 (1 s) and tier 1 (5 s) end before the expiration; tier 2 (30 s) would not.
        #expect(policy.afterRetryableFailure(attempt: 0, expiration: expiration, now: now) == .republish(tier: 0))
        #expect(policy.afterRetryableFailure(attempt: 1, expiration: expiration, now: now) == .republish(tier: 1))
        #expect(policy.afterRetryableFailure(attempt: 2, expiration: expiration, now: now) == .expired)
        #expect(policy.afterRetryableFailure(attempt: 0, expiration: 0, now: now) == .expired, "expiration 0 means try once")
    }

    @Test func deferralsPickTheShortestTierCoveringTheWait() {
        #expect(policy.deferral(retryAfter: .milliseconds(10), deferrals: 0, expiration: nil, now: now) == .republish(tier: 0))
        #expect(policy.deferral(retryAfter: .seconds(1), deferrals: 0, expiration: nil, now: now) == .republish(tier: 0))
        #expect(policy.deferral(retryAfter: .milliseconds(1001), deferrals: 0, expiration: nil, now: now) == .republish(tier: 1))
        #expect(policy.deferral(retryAfter: .seconds(60), deferrals: 2, expiration: nil, now: now) == .republish(tier: 3))
        #expect(policy.deferral(retryAfter: .seconds(3600), deferrals: 0, expiration: nil, now: now) == .republish(tier: 4), "the longest tier")
        #expect(policy.deferral(retryAfter: .seconds(1), deferrals: 3, expiration: nil, now: now) == .exhausted)
        #expect(policy.deferral(retryAfter: .seconds(60), deferrals: 0, expiration: now / 1000 + 100, now: now) == .expired)
    }

    @Test func expiredBatchesAreRecognisedButTryOnceIsNot() {
        #expect(RetryPolicy.isExpired(expiration: now / 1000 - 1, now: now))
        #expect(!RetryPolicy.isExpired(expiration: now / 1000 + 1, now: now))
        #expect(!RetryPolicy.isExpired(expiration: 0, now: now))
        #expect(!RetryPolicy.isExpired(expiration: nil, now: now))
    }

    @Test func noNumberFromAMessageOverflows() {
        // A huge expiration is "never"; these used to trap (expiration × 1000) and crash-loop push-send.
        #expect(!RetryPolicy.isExpired(expiration: .max, now: now))
        #expect(RetryPolicy.isExpired(expiration: .min, now: now) == false, "negative: refused by decoding; never a crash here")
        #expect(policy.afterRetryableFailure(attempt: 0, expiration: .max, now: now) == .republish(tier: 0))
        #expect(policy.deferral(retryAfter: .seconds(1), deferrals: 0, expiration: .max, now: now) == .republish(tier: 0))
        #expect(policy.afterRetryableFailure(attempt: .max, expiration: nil, now: now) == .exhausted)
        #expect(policy.deferral(retryAfter: .seconds(1), deferrals: .max, expiration: nil, now: now) == .exhausted)
        var report = SendBatchReport(batch: SendBatchReportTests.batch(tokens: 1, expiration: .max), deferrals: RetryPolicy.maximumCount)
        report.record(SendBatchReportTests.token(0), .deferred(reason: "RateLimited", retryAfter: .seconds(1)))
        #expect(
            report.plan(policy: policy, now: now, credentialPause: .seconds(1)).failures.keys.sorted() == ["RateLimited"],
            "dead-lettered, not crashed")
    }
}
