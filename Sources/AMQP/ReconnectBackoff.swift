/// Spacing of reconnection attempts: exponential with a cap and jitter.
///
/// Attempt n (0-based) waits `min(cap, base × factor^n)` scaled by a random factor in
/// `[1 - jitter, 1]`, so a fleet of services that lost the broker together does not reconnect in
/// lockstep. Defaults: base 100 ms, factor 2, cap 5 s, jitter 0.5 — a restarted broker is found again
/// within about 5 s of coming back, and a dead one costs one attempt every 2.5–5 s.
public struct ReconnectBackoff: Sendable, Equatable {
    public var base: Duration
    public var factor: Double
    public var cap: Duration
    /// Fraction of the delay that is random, 0…1.
    public var jitter: Double

    public init(base: Duration = .milliseconds(100), factor: Double = 2, cap: Duration = .seconds(5), jitter: Double = 0.5) {
        self.base = base
        self.factor = factor
        self.cap = cap
        self.jitter = jitter
    }

    /// The delay before attempt `attempt` (0-based), with `random` in 0…1 (injected for tests).
    public func delay(attempt: Int, random: Double = Double.random(in: 0...1)) -> Duration {
        let exponent = Double(min(attempt, 62))
        let raw = base * Double.minimum(Self.power(factor, exponent), 1e9)
        let capped = min(raw, cap)
        return capped * (1 - jitter * random)
    }

    private static func power(_ base: Double, _ exponent: Double) -> Double {
        var result = 1.0
        var remaining = Int(exponent)
        while remaining > 0 {
            result *= base
            remaining -= 1
            if result > 1e9 { return 1e9 }
        }
        return result
    }
}
