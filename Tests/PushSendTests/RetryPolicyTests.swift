import APNs
import PushCore
import PushServiceKit
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
        #expect(long.afterRetryableFailure(attempt: 12, expiration: nil, now: now) == .republish(tier: 5), "past the last tier it stays there")
    }

    /// Apple: a 5xx may be retried after 15 minutes, `TooManyRequests` after a delay; a notification
    /// whose connection went away (or was answered `Shutdown`) goes again at once on another.
    /// Apple's 15 minutes has a tier of its own, and the setting may only shorten it.
    @Test func theLongestSendTierIsApplesServerErrorWait() async throws {
        #expect(PushQueues.standard.send.retryTiers.last == RetryPolicy.appleServerErrorWait)
        #expect(SendConfiguration().serverErrorRetry == RetryPolicy.appleServerErrorWait)
        let shorter = try await PushConfigurationReader.load(environment: ["PUSH_SEND_SERVER_ERROR_RETRY_S": "30"])
        #expect(try SendConfiguration(reader: shorter).serverErrorRetry == .seconds(30))
        let over = try await PushConfigurationReader.load(environment: ["PUSH_SEND_SERVER_ERROR_RETRY_S": "901"])
        #expect {
            try SendConfiguration(reader: over)
        } throws: { error in
            "\(error)".contains("PUSH_SEND_SERVER_ERROR_RETRY_S")
        }
    }

    @Test func eachAnswerWaitsAtLeastWhatAppleAsksFor() {
        let long = RetryPolicy(tiers: PushQueues.standard.send.retryTiers, maxAttempts: 20, maxDeferrals: 3)
        let tiers = long.tiers
        func delays(_ wait: RetryWait) -> [Duration] {
            (0..<7).map { attempt in
                guard case .republish(let tier) = long.afterRetryableFailure(attempt: attempt, wait: wait, expiration: nil, now: now) else {
                    return .zero
                }
                return tiers[tier]
            }
        }
        #expect(delays(.prompt) == [1, 5, 30, 120, 600, 900, 900].map { .seconds($0) })
        #expect(delays(.backOff) == [30, 30, 30, 120, 600, 900, 900].map { .seconds($0) })
        #expect(delays(.serverError) == Array(repeating: .seconds(900), count: 7))
        let impatient = RetryPolicy(tiers: tiers, maxAttempts: 20, maxDeferrals: 3, serverErrorWait: .seconds(5))
        #expect(impatient.afterRetryableFailure(attempt: 0, wait: .serverError, expiration: nil, now: now) == .republish(tier: 1))
        let none = RetryPolicy(tiers: tiers, maxAttempts: 20, maxDeferrals: 3, serverErrorWait: .zero)
        #expect(none.afterRetryableFailure(attempt: 0, wait: .serverError, expiration: nil, now: now) == .republish(tier: 0))
        // A 5xx with 10 minutes left: the 15 minute wait would outlive it.
        #expect(long.afterRetryableFailure(attempt: 0, wait: .serverError, expiration: now / 1000 + 600, now: now) == .expired)
        #expect(long.afterRetryableFailure(attempt: 0, wait: .prompt, expiration: now / 1000 + 600, now: now) == .republish(tier: 0))
    }

    @Test func answersAreSortedIntoWaitsByStatusAndReason() {
        #expect(RetryWait(status: 503, reason: .shutdown) == .prompt)
        #expect(RetryWait(status: 503, reason: APNsReason("Shutdown")) == .prompt)
        #expect(RetryWait(status: 400, reason: .idleTimeout) == .prompt)
        #expect(RetryWait(status: 429, reason: .tooManyRequests) == .backOff)
        #expect(RetryWait(status: 429, reason: .tooManyProviderTokenUpdates) == .backOff)
        #expect(RetryWait(status: 429, reason: nil) == .backOff)
        #expect(RetryWait(status: 500, reason: .internalServerError) == .serverError)
        #expect(RetryWait(status: 503, reason: .serviceUnavailable) == .serverError)
        #expect(RetryWait(status: 503, reason: nil) == .serverError)
        #expect(RetryWait(status: 502, reason: nil) == .serverError)
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
        #expect(policy.deferral(retryAfter: .seconds(3600), deferrals: 0, expiration: nil, now: now) == .republish(tier: 5), "the longest tier")
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
