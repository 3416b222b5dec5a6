import PushCore
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

/// The harness's own promises, since every suite's verdicts rest on them: a service group that does
/// not stop in time fails the test (and is cancelled), a failing body still shuts the group down,
/// `eventually` fails when the condition never holds, the clean-up always runs.
@Suite("Test harness", .timeLimit(.minutes(1)))
struct HarnessTests {
    @Test func aGroupThatStopsInTimeReturnsTheBodysValue() async throws {
        let stopped = Flag()
        let value = try await withRunningServices([UntilShutdown(stopped: stopped)], logger: TestLogger.make("harness-tests")) { _ in 42 }
        #expect(value == 42)
        #expect(stopped.isSet)
    }

    @Test func aGroupPastTheBoundIsCancelledAndFailsNamingTheService() async throws {
        let cancelled = Flag()
        let started = ContinuousClock.now
        let error = await #expect(throws: TestFailure.self) {
            try await withRunningServices(
                [IgnoresShutdown(cancelled: cancelled)], logger: TestLogger.make("harness-tests"), shutdownWithin: .milliseconds(200)
            ) { _ in }
        }
        #expect(error?.description.contains("IgnoresShutdown did not stop within") == true, "\(String(describing: error))")
        #expect(cancelled.isSet)
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func aFailingBodyStillShutsTheGroupDownAndItsErrorComesThrough() async throws {
        let stopped = Flag()
        await #expect(throws: BodyFailure.self) {
            try await withRunningServices([UntilShutdown(stopped: stopped)], logger: TestLogger.make("harness-tests")) { _ in
                throw BodyFailure()
            }
        }
        #expect(stopped.isSet)
    }

    @Test func eventuallyReturnsOnceTrueAndFailsNamingWhatNeverHappened() async throws {
        let polls = Mutex(0)
        try await eventually("the third poll", timeout: .seconds(5), poll: .milliseconds(1)) {
            polls.withLock {
                $0 += 1
                return $0 == 3
            }
        }
        let error = await #expect(throws: TestFailure.self) {
            try await eventually("never", timeout: .milliseconds(50), poll: .milliseconds(5)) { false }
        }
        #expect(error?.description == "never: not true within 0.05 seconds")
    }

    @Test func theCleanUpAlwaysRunsAndTheBodysErrorWins() async throws {
        let cleaned = Flag()
        await #expect(throws: BodyFailure.self) {
            try await withCleanUp {
                throw BodyFailure()
            } cleanUp: {
                cleaned.set()
                throw CleanUpFailure()
            }
        }
        #expect(cleaned.isSet)
        await #expect(throws: CleanUpFailure.self) {
            try await withCleanUp {
            } cleanUp: {
                throw CleanUpFailure()
            }
        }
    }

    @Test func numberedTokensAreTheSeedInHexBehindThePrefix() {
        #expect(TestTokens.numbered(255, prefix: "f00d").hex == "f00d" + String(repeating: "0", count: 58) + "ff")
        #expect(TestTokens.random().count == 64)
        #expect(TestTokens.randomPrefix().count == 16)
    }

    @Test func splitMix64MatchesTheReferenceSequence() {
        // Vigna's splitmix64.c from state 0.
        var generator = SplitMix64(seed: 0)
        #expect([generator.next(), generator.next(), generator.next()] == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
    }
}

private struct BodyFailure: Error {}
private struct CleanUpFailure: Error {}

private final class Flag: Sendable {
    private let value = Atomic(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

/// Runs until graceful shutdown, then returns.
private struct UntilShutdown: Service {
    let stopped: Flag
    func run() async throws {
        try? await gracefulShutdown()
        stopped.set()
    }
}

/// Ignores graceful shutdown; only cancellation stops it.
private struct IgnoresShutdown: Service {
    let cancelled: Flag
    func run() async throws {
        while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
        cancelled.set()
    }
}
