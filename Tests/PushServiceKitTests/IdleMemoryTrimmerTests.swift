import PushServiceKit
import Synchronization
import TestSupport
import Testing

/// Returning memory to the system once a burst of work is over.
@Suite struct IdleMemoryTrimmerTests {
    @Test func trimsOnceWhenWorkIsFollowedByIdleness() {
        var policy = IdleTrimPolicy()
        let interval = Duration.seconds(5)
        let steps: [(Duration, Bool, String)] = [
            (.milliseconds(1), false, "idle from the start: nothing to give back"),
            (.seconds(4), false, "working"),
            (.milliseconds(100), false, "2% of a core still counts as work"),
            (.milliseconds(20), true, "idle after work: trim"),
            (.milliseconds(20), false, "once per idle stretch"),
            (.seconds(9), false, "working again"),
            (.zero, true, "idle again"),
        ]
        for (cpu, trims, why) in steps {
            let decision = policy.shouldTrim(cpuUsed: cpu, over: interval)
            #expect(decision == trims, "\(why)")
        }
    }

    @Test func theServiceTrimsAfterABurstOfCPUAndStopsOnGracefulShutdown() async throws {
        let trims = Atomic<Int>(0)
        let trimmer = IdleMemoryTrimmer(interval: .milliseconds(200)) { trims.add(1, ordering: .relaxed) }
        try await withRunningServices([trimmer], logger: TestLogger.make("trim-test")) { _ in
            // Busy for 300 ms (well above 1% of a core), then idle.
            let busyUntil = ContinuousClock.now + .milliseconds(300)
            var spin = 0
            while ContinuousClock.now < busyUntil { spin &+= 1 }
            #expect(spin > 0)
            let deadline = ContinuousClock.now + .seconds(10)
            while trims.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(trims.load(ordering: .relaxed) == 1)
        }
    }
}
