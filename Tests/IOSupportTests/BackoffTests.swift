import Glibc
import Synchronization
import TestSupport
import Testing

@testable import IOSupport

@Suite("Backoff")
struct BackoffTests {
    @Test func ceilingDoublesFromBaseUpToTheCap() {
        let backoff = Backoff.redis
        let ceilings = (0..<8).map { backoff.ceiling(afterFailures: $0) }
        #expect(ceilings == [50, 100, 200, 400, 800, 1600, 2000, 2000].map { Duration.milliseconds($0) })
        #expect(backoff.ceiling(afterFailures: 10_000) == .seconds(2))
        #expect(backoff.ceiling(afterFailures: -3) == .milliseconds(50))
    }

    @Test func customPolicy() {
        let backoff = Backoff(base: .milliseconds(10), factor: 3, cap: .milliseconds(500), jitter: 1)
        #expect((0..<5).map { backoff.ceiling(afterFailures: $0) } == [10, 30, 90, 270, 500].map { Duration.milliseconds($0) })
    }

    @Test func growsExponentiallyUpToTheCap() {
        let backoff = Backoff(base: .milliseconds(100), factor: 2, cap: .seconds(5), jitter: 0.5)
        #expect(backoff.delay(afterFailures: 0, random: 0) == .milliseconds(100))
        #expect(backoff.delay(afterFailures: 1, random: 0) == .milliseconds(200))
        #expect(backoff.delay(afterFailures: 3, random: 0) == .milliseconds(800))
        #expect(backoff.delay(afterFailures: 10, random: 0) == .seconds(5))
        #expect(backoff.delay(afterFailures: 1000, random: 0) == .seconds(5))
    }

    @Test func jitterTakesAtMostItsShare() {
        let backoff = Backoff(base: .seconds(1), factor: 2, cap: .seconds(4), jitter: 0.5)
        #expect(backoff.delay(afterFailures: 2, random: 1) == .seconds(2))
        #expect(backoff.delay(afterFailures: 2, random: 0.5) == .seconds(3))
    }

    @Test func fullJitterStaysWithinTheCeiling() {
        let backoff = Backoff.redis
        var generator = SplitMix64(seed: 42)
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

    /// The three clients' documented numbers.
    @Test func eachClientsRule() {
        #expect(Backoff.amqp.delay(afterFailures: 0, random: 0) == .milliseconds(100))
        #expect(Backoff.amqp.delay(afterFailures: 0, random: 1) == .milliseconds(50))
        #expect(Backoff.amqp.delay(afterFailures: 20, random: 0) == .seconds(5))
        #expect(Backoff.redis.delay(afterFailures: 0, random: 1) == .zero)
        // APNs: 80–120 ms first, 4–6 s at the cap.
        #expect(Backoff.apns.delay(afterFailures: 0, random: 0) == .milliseconds(120))
        #expect(abs(Double(Backoff.apns.delay(afterFailures: 0, random: 1).nanoseconds) - 80e6) < 1e3)
        #expect(Backoff.apns.delay(afterFailures: 30, random: 0) == .seconds(6))
        #expect(abs(Double(Backoff.apns.delay(afterFailures: 30, random: 1).nanoseconds) - 4e9) < 1e3)
    }

    @Test func jitterOutsideZeroToOneIsClamped() {
        #expect(Backoff(base: .seconds(1), cap: .seconds(1), jitter: 7).jitter == 1)
        #expect(Backoff(base: .seconds(1), cap: .seconds(1), jitter: -1).jitter == 0)
    }
}

@Suite("Monotonic clock and durations")
struct MonotonicClockTests {
    @Test func nanosecondsSaturate() {
        #expect(Duration.seconds(-5).nanoseconds == 0)
        #expect(Duration.milliseconds(1500).nanoseconds == 1_500_000_000)
        #expect(Duration.seconds(Int64.max).nanoseconds == UInt64.max)
    }

    @Test func clockMovesForward() {
        let first = monotonicNanoseconds()
        let second = monotonicNanoseconds()
        #expect(second >= first)
    }
}

@Suite("Wake pipe and I/O thread")
struct WakePipeTests {
    @Test func wakeMakesThePipeReadableAndDrainEmptiesIt() throws {
        let pipe = try WakePipe()
        for _ in 0..<1000 { pipe.wake() }
        #expect(readable(pipe.readEnd))
        pipe.drain()
        #expect(!readable(pipe.readEnd))
    }

    @Test func threadRunsItsBodyAndCanBeJoined() async {
        let ran = Flag()
        let thread = IOThread.start(name: "io-support-test") { ran.set() }
        await thread.join()
        #expect(ran.isSet)
        #expect(thread.hasExited)
        await thread.join()
    }

    private func readable(_ descriptor: Int32) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1
    }
}

final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
