/// Spacing of reconnection attempts, the one rule for AMQP, Redis and APNs: exponential with a cap
/// and jitter.
///
/// After `failures` failed attempts in a row (0 for the first retry) the wait is
/// `ceiling × (1 − jitter × r)` with `ceiling = min(cap, base × factor^failures)` and `r` uniformly
/// random in 0…1. `jitter` is the fraction of the wait that is random: 0 waits exactly the ceiling,
/// 1 is "full jitter" (anywhere in `[0, ceiling]`). Jitter keeps a fleet of services that lost a
/// server together from coming back in lockstep. Each client documents its own numbers (``amqp``,
/// ``redis``, ``apns``).
public struct Backoff: Sendable, Equatable {
    public var base: Duration
    public var factor: Double
    public var cap: Duration
    /// Fraction of the wait that is random, 0…1.
    public var jitter: Double

    public init(base: Duration, factor: Double = 2, cap: Duration, jitter: Double) {
        self.base = base
        self.factor = factor
        self.cap = cap
        self.jitter = min(max(jitter, 0), 1)
    }

    /// RabbitMQ: 100 ms doubling to 5 s, half of it random: a restarted broker is found again within
    /// about 5 s of coming back, and a dead one costs one attempt every 2.5–5 s.
    public static let amqp = Backoff(base: .milliseconds(100), factor: 2, cap: .seconds(5), jitter: 0.5)

    /// Redis: 50 ms doubling to 2 s, full jitter: a restarted Redis is found within about 2 s of
    /// accepting connections, and an absent one costs each connection one attempt a second on average.
    public static let redis = Backoff(base: .milliseconds(50), factor: 2, cap: .seconds(2), jitter: 1)

    /// APNs: 120 ms doubling to 6 s, a third random (80–120 ms first, 4–6 s at the cap): a connection
    /// refused by Apple is tried again soon, a long outage costs one attempt every few seconds.
    public static let apns = Backoff(base: .milliseconds(120), factor: 2, cap: .seconds(6), jitter: 1.0 / 3.0)

    /// The longest wait after `failures` failed attempts in a row: `min(cap, base × factor^failures)`.
    public func ceiling(afterFailures failures: Int) -> Duration {
        var ceiling = base
        var remaining = max(0, failures)
        while remaining > 0, ceiling < cap {
            ceiling = ceiling * factor
            remaining -= 1
        }
        return min(ceiling, cap)
    }

    /// The wait after `failures` failed attempts, with `random` in 0…1 (injected by tests).
    public func delay(afterFailures failures: Int, random: Double) -> Duration {
        ceiling(afterFailures: failures) * (1 - jitter * min(max(random, 0), 1))
    }

    /// The wait after `failures` failed attempts, drawn from `generator`.
    public func delay(afterFailures failures: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        delay(afterFailures: failures, random: Double.random(in: 0...1, using: &generator))
    }

    /// The wait after `failures` failed attempts, drawn from the system generator.
    public func delay(afterFailures failures: Int) -> Duration {
        delay(afterFailures: failures, random: Double.random(in: 0...1))
    }
}
