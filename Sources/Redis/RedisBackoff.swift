/// Spacing of reconnection attempts: exponential with a cap and full jitter.
///
/// After the n-th failed attempt in a row (n = 0 for the first) the connection waits a uniformly random
/// time in `[0, min(cap, base × factor^n)]` ("full jitter"), so the many connections of many services
/// that lost Redis together do not come back in lockstep. Defaults: base 50 ms, factor 2, cap 2 s —
/// a restarted Redis is found again within about 2 s of accepting connections, and an absent one costs
/// each connection one attempt per second on average. A connection that *breaks* retries at once
/// (the first attempt has no delay), because a restart is usually over by then or soon after.
public struct RedisBackoff: Sendable, Equatable {
    public var base: Duration
    public var factor: Double
    public var cap: Duration

    public init(base: Duration = .milliseconds(50), factor: Double = 2, cap: Duration = .seconds(2)) {
        self.base = base
        self.factor = factor
        self.cap = cap
    }

    /// The longest wait after `failures` failed attempts in a row (0-based): `min(cap, base × factor^failures)`.
    public func ceiling(afterFailures failures: Int) -> Duration {
        var ceiling = base
        var remaining = max(0, failures)
        while remaining > 0, ceiling < cap {
            ceiling = ceiling * factor
            remaining -= 1
        }
        return min(ceiling, cap)
    }

    /// A random wait in `[0, ceiling(afterFailures:)]`.
    public func delay(afterFailures failures: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        ceiling(afterFailures: failures) * Double.random(in: 0...1, using: &generator)
    }

    /// A random wait in `[0, ceiling(afterFailures:)]` from the system generator.
    public func delay(afterFailures failures: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(afterFailures: failures, using: &generator)
    }
}

/// When the connection thread next tries to connect: the backoff state of one connection, a value type
/// so the policy is tested without sockets or clocks.
struct ReconnectSchedule: Sendable {
    let backoff: RedisBackoff
    /// Failed attempts since the last successful connect.
    private(set) var failures = 0
    /// The earliest time for the next attempt while disconnected.
    private(set) var nextAttempt: ContinuousClock.Instant

    /// A new connection tries at once.
    init(backoff: RedisBackoff, now: ContinuousClock.Instant) {
        self.backoff = backoff
        self.nextAttempt = now
    }

    mutating func connected() {
        failures = 0
    }

    /// A working connection broke: try again at once.
    mutating func connectionLost(at now: ContinuousClock.Instant) {
        failures = 0
        nextAttempt = now
    }

    /// An attempt failed: wait per ``RedisBackoff``. Returns the chosen delay (for the log line).
    @discardableResult
    mutating func attemptFailed(at now: ContinuousClock.Instant, using generator: inout some RandomNumberGenerator) -> Duration {
        let delay = backoff.delay(afterFailures: failures, using: &generator)
        failures += 1
        nextAttempt = now + delay
        return delay
    }
}
