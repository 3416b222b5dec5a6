/// The generic cell rate algorithm (GCRA), as pure arithmetic: the Swift mirror of
/// ``RateLimiter``'s Lua script, so the maths is unit-tested without Redis.
///
/// A limit of `limit` per `period` emits one unit every `interval = period / limit`. The state is one
/// number per key, the *theoretical arrival time* (TAT): when the key would be back to idle if
/// requests kept coming at exactly the limit. A request of `cost` units moves TAT by
/// `cost × interval`; it is allowed when the new TAT is at most `tolerance = burst × interval` ahead
/// of now. So an idle key takes `burst` requests at once, then one per interval; no timer runs and
/// nothing is refilled, and an idle key's state can simply expire once TAT has passed.
///
/// Times are integer microseconds: exact in Lua's doubles for centuries of Unix time (< 2^53).
public struct GCRA: Sendable, Hashable {
    /// Microseconds between units at the sustained rate (at least 1).
    public let interval: Int64
    /// How far ahead of now TAT may run: `burst × interval`.
    public let tolerance: Int64

    /// `limit` units per `period`, with up to `burst` (default `limit`) at once.
    ///
    /// - Precondition: `limit ≥ 1`, `period > 0`, `burst ≥ 1` — limits come from validated
    ///   configuration, so anything else is a programming error.
    public init(limit: Int, period: Duration, burst: Int? = nil) {
        precondition(limit >= 1, "a rate limit needs limit >= 1, got \(limit)")
        precondition(period > .zero, "a rate limit needs a positive period, got \(period)")
        let burst = burst ?? limit
        precondition(burst >= 1, "a rate limit needs burst >= 1, got \(burst)")
        let (seconds, attoseconds) = period.components
        let periodMicroseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        self.interval = Swift.max(1, periodMicroseconds / Int64(limit))
        self.tolerance = interval * Int64(burst)
    }

    /// The outcome of one request at `now`, given the stored TAT (nil when the key is absent).
    ///
    /// - Returns: the decision, and the TAT to store (nil when nothing changes: a refused request, or
    ///   a cost-0 probe of an idle key). The state may be dropped after `newTAT − now` µs.
    public func decide(tat storedTAT: Int64?, now: Int64, cost: Int = 1) -> (decision: RateLimitDecision, newTAT: Int64?) {
        let tat = Swift.max(storedTAT ?? now, now)
        let newTAT = tat + interval * Int64(cost)
        let allowAt = newTAT - tolerance
        if allowAt > now {
            return (.limited(retryAfter: .microseconds(allowAt - now)), nil)
        }
        let remaining = Int((tolerance - (newTAT - now)) / interval)
        return (.allowed(remaining: remaining), newTAT > now ? newTAT : nil)
    }
}
