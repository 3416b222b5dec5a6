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

    @Test func theServiceTrimsOnceWhenItsCPUTimeStopsGrowingAndStopsOnGracefulShutdown() async throws {
        // The CPU time the service reads: 300 ms of work in its first interval, then none. Not the
        // test process's own, which every test running beside this one adds to.
        let cpuMicroseconds = Atomic<Int64>(0)
        let reads = Atomic<Int>(0)
        let trims = Atomic<Int>(0)
        let trimmer = IdleMemoryTrimmer(
            interval: .milliseconds(20),
            trim: { trims.add(1, ordering: .relaxed) },
            cpuTime: {
                if reads.add(1, ordering: .relaxed).newValue == 2 { cpuMicroseconds.store(300_000, ordering: .relaxed) }
                return .microseconds(cpuMicroseconds.load(ordering: .relaxed))
            }
        )
        try await withRunningServices([trimmer], logger: TestLogger.make("trim-test")) { _ in
            let deadline = ContinuousClock.now + .seconds(10)
            while reads.load(ordering: .relaxed) < 8, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(reads.load(ordering: .relaxed) >= 8, "the service reads its CPU time every interval")
            #expect(trims.load(ordering: .relaxed) == 1, "one trim for one idle stretch after work")
        }
        let readsAtShutdown = reads.load(ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(100))
        #expect(reads.load(ordering: .relaxed) == readsAtShutdown, "nothing runs after a graceful shutdown")
    }

    @Test func theProcessCPUTimeGrowsWithWork() {
        let before = IdleMemoryTrimmer.processCPUTime()
        let busyUntil = ContinuousClock.now + .milliseconds(50)
        var spin = 0
        while ContinuousClock.now < busyUntil { spin &+= 1 }
        #expect(spin > 0)
        #expect(IdleMemoryTrimmer.processCPUTime() > before)
    }
}
