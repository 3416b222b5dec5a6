import IOSupport

/// When the connection thread next tries to connect: the backoff state of one connection, a value type
/// so the policy is tested without sockets or clocks.
struct ReconnectSchedule: Sendable {
    let backoff: Backoff
    /// Failed attempts since the last successful connect.
    private(set) var failures = 0
    /// The earliest time for the next attempt while disconnected.
    private(set) var nextAttempt: ContinuousClock.Instant

    /// A new connection tries at once.
    init(backoff: Backoff, now: ContinuousClock.Instant) {
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

    /// An attempt failed: wait per the backoff (``Backoff/redis`` by default). Returns the chosen delay (for the log line).
    @discardableResult
    mutating func attemptFailed(at now: ContinuousClock.Instant, using generator: inout some RandomNumberGenerator) -> Duration {
        let delay = backoff.delay(afterFailures: failures, using: &generator)
        failures += 1
        nextAttempt = now + delay
        return delay
    }
}
