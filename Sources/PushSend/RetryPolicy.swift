import PushCore

/// Where a notification that was not sent for good goes next: a delayed-retry tier of `push.send`,
/// or nowhere (expired, or out of tries). Pure: the caller passes the time.
///
/// Two kinds of "later":
/// - a **retry** (429, 5xx, connection lost, timeout) counts as an attempt: attempt `n` (0 for the
///   first try) that failed goes to tier `min(n, last)`, so delays grow 1 s, 5 s, 30 s, 2 min,
///   10 min, 15 min, 15 min, … (``PushCore/PushQueues``' `send.retryTiers`), but never to a tier
///   shorter than what the answer asks for (``RetryWait``: 30 s after a 429, ``serverErrorWait``
///   after a 5xx); after ``maxAttempts`` tries the notification is given up (dead-lettered);
/// - a **deferral** (rate limited, the app's sending paused) is not an attempt: it goes to the shortest
///   tier at least as long as the wait asked for (the longest tier if none is), at most
///   ``maxDeferrals`` times.
///
/// Neither goes past the notification's `expiration`: when the tier's delay would end after it, the
/// notification is expired instead. `expiration: 0` (APNs' "try once") allows no later try at all;
/// no `expiration` leaves only the attempt and deferral bounds.
public struct RetryPolicy: Sendable, Hashable {
    /// The tier delays, shortest first (``PushCore/WorkQueue/retryTiers``).
    public let tiers: [Duration]
    /// The largest attempt or deferral count a message may carry (``SendBatchDecoding`` refuses a
    /// larger `attempt`, the deferrals header is clamped to it).
    public static let maximumCount = 1_000_000

    /// Tries of one notification, the first included (at least 1).
    public let maxAttempts: Int
    /// Deferrals of one notification (at least 1).
    public let maxDeferrals: Int

    /// The shortest wait after a 429 (``RetryWait/backOff``): Apple asks for "a delay" and names none.
    public static let backOffWait: Duration = .seconds(30)
    /// Apple's wait before a notification answered with a 5xx is tried again: 15 minutes. The longest
    /// `push.send` tier is as long, and `PUSH_SEND_SERVER_ERROR_RETRY_S` may only shorten it.
    public static let appleServerErrorWait: Duration = .seconds(900)
    /// The shortest wait after a 5xx (``RetryWait/serverError``): ``appleServerErrorWait`` unless configured shorter.
    public let serverErrorWait: Duration

    public init(tiers: [Duration], maxAttempts: Int, maxDeferrals: Int, serverErrorWait: Duration = appleServerErrorWait) {
        precondition(!tiers.isEmpty, "a retry policy needs at least one tier")
        self.tiers = tiers
        self.maxAttempts = Swift.max(1, maxAttempts)
        self.maxDeferrals = Swift.max(1, maxDeferrals)
        self.serverErrorWait = serverErrorWait
    }

    /// The shortest wait `wait` allows before the next try.
    public func shortestWait(_ wait: RetryWait) -> Duration {
        switch wait {
        case .prompt: .zero
        case .backOff: Self.backOffWait
        case .serverError: serverErrorWait
        }
    }

    public enum Decision: Sendable, Hashable {
        /// Republish to tier `tier` (its index in ``tiers``).
        case republish(tier: Int)
        /// The expiration would pass first: drop and report `failed.Expired`.
        case expired
        /// Out of attempts or deferrals: dead-letter.
        case exhausted
    }

    /// After attempt `attempt` (0-based) of a notification failed with a retryable answer.
    ///
    /// - Parameters:
    ///   - wait: How soon the answer allows another try.
    ///   - expiration: The batch's `expiration` (seconds since 1970; 0 = try once).
    ///   - now: Milliseconds since 1970.
    public func afterRetryableFailure(attempt: Int, wait: RetryWait = .prompt, expiration: Int64?, now: Int64) -> Decision {
        // Written so that no attempt count from a message can overflow.
        if attempt >= maxAttempts - 1 {
            return .exhausted
        }
        let tier = WorkQueue.tier(afterRetries: attempt, atLeast: shortestWait(wait), in: tiers)
        return checked(tier: tier, expiration: expiration, now: now)
    }

    /// When a notification must wait `retryAfter` (rate limit, paused app) and was deferred
    /// `deferrals` times before.
    public func deferral(retryAfter: Duration, deferrals: Int, expiration: Int64?, now: Int64) -> Decision {
        if deferrals >= maxDeferrals {
            return .exhausted
        }
        let tier = tiers.firstIndex { $0 >= retryAfter } ?? tiers.count - 1
        return checked(tier: tier, expiration: expiration, now: now)
    }

    /// Whether the notification may still be tried once the notification comes back from `tier`.
    private func checked(tier: Int, expiration: Int64?, now: Int64) -> Decision {
        guard let expiration else {
            return .republish(tier: tier)
        }
        if expiration == 0 || now + Self.milliseconds(tiers[tier]) > Self.expirationMilliseconds(expiration) {
            return .expired
        }
        return .republish(tier: tier)
    }

    /// Whether a batch with this `expiration` is already past it at `now` (ms). `0` (try once) is
    /// never expired before the first try.
    public static func isExpired(expiration: Int64?, now: Int64) -> Bool {
        guard let expiration, expiration > 0 else { return false }
        return now > expirationMilliseconds(expiration)
    }

    /// `expiration` (seconds) in ms, saturating: a value past year 292,278,994 is "never" rather
    /// than an overflow that would stop the process.
    static func expirationMilliseconds(_ expiration: Int64) -> Int64 {
        let (milliseconds, overflow) = expiration.multipliedReportingOverflow(by: 1000)
        return overflow ? (expiration < 0 ? .min : .max) : milliseconds
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
