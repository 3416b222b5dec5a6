import Testing

@testable import Redis

@Suite("Reconnect backoff")
struct RedisBackoffTests {
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

    @Test func ceilingDoublesFromBaseUpToTheCap() {
        let backoff = RedisBackoff()
        let ceilings = (0..<8).map { backoff.ceiling(afterFailures: $0) }
        #expect(ceilings == [50, 100, 200, 400, 800, 1600, 2000, 2000].map { Duration.milliseconds($0) })
        #expect(backoff.ceiling(afterFailures: 10_000) == .seconds(2))
        #expect(backoff.ceiling(afterFailures: -3) == .milliseconds(50))
    }

    @Test func customPolicy() {
        let backoff = RedisBackoff(base: .milliseconds(10), factor: 3, cap: .milliseconds(500))
        #expect((0..<5).map { backoff.ceiling(afterFailures: $0) } == [10, 30, 90, 270, 500].map { Duration.milliseconds($0) })
    }

    @Test func fullJitterStaysWithinTheCeiling() {
        let backoff = RedisBackoff()
        var generator = SplitMix(state: 42)
        for failures in 0..<12 {
            var smallest = Duration.seconds(10)
            var largest = Duration.zero
            for _ in 0..<200 {
                let delay = backoff.delay(afterFailures: failures, using: &generator)
                smallest = min(smallest, delay)
                largest = max(largest, delay)
            }
            let ceiling = backoff.ceiling(afterFailures: failures)
            #expect(smallest >= .zero)
            #expect(largest <= ceiling)
            // Full jitter spreads over the whole range, not just near the ceiling.
            #expect(smallest < ceiling * 0.2)
            #expect(largest > ceiling * 0.8)
        }
    }

    @Test func scheduleTriesAtOnceThenBacksOffAndResets() {
        let start = ContinuousClock.now
        var schedule = ReconnectSchedule(backoff: RedisBackoff(), now: start)
        #expect(schedule.nextAttempt == start)

        var generator = SplitMix(state: 7)
        var now = start
        for failure in 0..<8 {
            let delay = schedule.attemptFailed(at: now, using: &generator)
            #expect(schedule.failures == failure + 1)
            #expect(schedule.nextAttempt == now + delay)
            #expect(delay <= RedisBackoff().ceiling(afterFailures: failure))
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
