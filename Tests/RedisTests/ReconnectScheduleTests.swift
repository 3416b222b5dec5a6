import IOSupport
import Testing

@testable import Redis

@Suite("Reconnect schedule")
struct ReconnectScheduleTests {
    /// A deterministic generator (SplitMix64) so jittered delays are reproducible.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test func scheduleTriesAtOnceThenBacksOffAndResets() {
        let start = ContinuousClock.now
        var schedule = ReconnectSchedule(backoff: Backoff.redis, now: start)
        #expect(schedule.nextAttempt == start)

        var generator = SplitMix(state: 7)
        var now = start
        for failure in 0..<8 {
            let delay = schedule.attemptFailed(at: now, using: &generator)
            #expect(schedule.failures == failure + 1)
            #expect(schedule.nextAttempt == now + delay)
            #expect(delay <= Backoff.redis.ceiling(afterFailures: failure))
            now = schedule.nextAttempt
        }

        schedule.connected()
        #expect(schedule.failures == 0)
        let lostAt = now + .seconds(30)
        schedule.connectionLost(at: lostAt)
        #expect(schedule.nextAttempt == lostAt)
        let delay = schedule.attemptFailed(at: lostAt, using: &generator)
        #expect(delay <= .milliseconds(50))
    }
}
