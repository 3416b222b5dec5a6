import IOSupport
import TestSupport
import Testing

@testable import Redis

@Suite("Reconnect schedule")
struct ReconnectScheduleTests {
    @Test func scheduleTriesAtOnceThenBacksOffAndResets() {
        let start = ContinuousClock.now
        var schedule = ReconnectSchedule(backoff: Backoff.redis, now: start)
        #expect(schedule.nextAttempt == start)

        var generator = SplitMix64(seed: 7)
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
