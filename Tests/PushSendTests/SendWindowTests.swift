import Synchronization
import Testing

@testable import PushSend

/// The bound on notifications sent and not yet settled: what a kill -9 can repeat.
@Suite struct SendWindowTests {
    @Test func placesAreHandedOutUpToTheSizeThenInArrivalOrder() async throws {
        let window = SendWindow(floor: 2, ceiling: 2)
        await window.acquire()
        await window.acquire()
        #expect(window.inUse == 2)
        let order = ArrivalOrder()
        let first = Task {
            await window.acquire()
            order.append(1)
        }
        try await Task.sleep(for: .milliseconds(50))
        let second = Task {
            await window.acquire()
            order.append(2)
        }
        try await Task.sleep(for: .milliseconds(50))
        #expect(order.values.isEmpty, "both wait while the window is full")
        window.release(holding: nil)
        await first.value
        #expect(order.values == [1])
        window.release(holding: nil)
        await second.value
        #expect(order.values == [1, 2])
        #expect(window.inUse == 2)
        window.release(holding: nil)
        window.release(holding: nil)
        #expect(window.inUse == 0)
    }
}

/// The window's size as Little's law sets it: rate × shortest round trip × headroom.
@Suite struct WindowSizerTests {
    /// Runs `periods` periods of 200 ms in which the window is full and each notification holds
    /// its place `roundTrip`, settling `min(window, cpuLimit × period)` per period... as a closed
    /// system does: settled per period = min(size / roundTrip, cpuRate) × period.
    static func simulate(_ sizer: inout WindowSizer, roundTrip: Duration, cpuRate: Double, periods: Int) -> [Int] {
        var sizes: [Int] = []
        for _ in 0..<periods {
            let windowRate = Double(sizer.size) / WindowSizer.seconds(roundTrip)
            let settled = Int(min(windowRate, cpuRate) * WindowSizer.seconds(WindowSizer.period))
            for _ in 0..<settled { sizer.settled(holding: roundTrip) }
            _ = sizer.endPeriod(elapsed: WindowSizer.period)
            sizes.append(sizer.size)
        }
        return sizes
    }

    @Test func appleLatencyGrowsTheWindowUntilTheCPUIsTheLimit() {
        var sizer = WindowSizer(floor: 256, ceiling: 10_000)
        let sizes = Self.simulate(&sizer, roundTrip: .milliseconds(150), cpuRate: 30_000, periods: 20)
        // Needed: 30,000/s × 0.15 s = 4,500 in flight; with headroom 2 the aim is 9,000.
        #expect(sizes.first == 512, "doubles while the window is the limit")
        #expect(sizes.last == 9000, "\(sizes)")
        #expect(sizes.allSatisfy { $0 <= 10_000 })
    }

    @Test func theCeilingHolds() {
        var sizer = WindowSizer(floor: 256, ceiling: 3000)
        let sizes = Self.simulate(&sizer, roundTrip: .milliseconds(150), cpuRate: 100_000, periods: 20)
        #expect(sizes.last == 3000)
    }

    @Test func loopbackSettlesAtAFewHundred() {
        var sizer = WindowSizer(floor: 256, ceiling: 10_000)
        // 1 ms round trip at 35,000/s: 35 in the air are enough; the floor holds.
        var sizes = Self.simulate(&sizer, roundTrip: .milliseconds(1), cpuRate: 35_000, periods: 10)
        #expect(sizes.last == 256)
        // 5 ms: 175 needed, 350 aimed at, once the 1 ms round trip has gone unconfirmed for 20 s
        // (at the floor there is no queue of the window's making to probe for).
        sizes = Self.simulate(&sizer, roundTrip: .milliseconds(5), cpuRate: 35_000, periods: 110)
        #expect(sizes[..<99].allSatisfy { $0 == 256 }, "\(sizes)")
        #expect(sizes.last == 350, "\(sizes)")
    }

    @Test func itShrinksByAtMostAQuarterAPeriodAndRemembersTheShortestRoundTrip() {
        var sizer = WindowSizer(floor: 100, ceiling: 10_000)
        _ = Self.simulate(&sizer, roundTrip: .milliseconds(150), cpuRate: 20_000, periods: 20)
        #expect(sizer.size == 6000)
        // The rate drops to a tenth (little work): the aim is 600, reached a quarter at a time.
        for _ in 0..<400 { sizer.settled(holding: .milliseconds(150)) }
        #expect(sizer.endPeriod(elapsed: WindowSizer.period) == 4500)
        // A period with nothing settled changes nothing.
        #expect(sizer.endPeriod(elapsed: WindowSizer.period) == nil)
        #expect(sizer.size == 4500)
        // Slow answers (queued somewhere) don't raise the round trip while a short one is remembered.
        for _ in 0..<400 { sizer.settled(holding: .seconds(2)) }
        #expect(sizer.endPeriod(elapsed: WindowSizer.period) == 3375)
    }

    /// Runs `periods` periods against a server that answers at most `serverRate` a second after
    /// `latency`, the window always full: what is in flight beyond `serverRate × latency` waits in the
    /// server's queue, so each answer takes `max(latency, size / serverRate)` (Little's law), the
    /// waiting included, which the client cannot tell from distance. Returns the sizes.
    static func simulateServerBound(_ sizer: inout WindowSizer, latency: Duration, serverRate: Double, periods: Int) -> [Int] {
        var sizes: [Int] = []
        for _ in 0..<periods {
            let roundTrip = max(WindowSizer.seconds(latency), Double(sizer.size) / serverRate)
            let settled = Int(min(Double(sizer.size) / roundTrip, serverRate) * WindowSizer.seconds(WindowSizer.period))
            for _ in 0..<settled { sizer.settled(holding: .nanoseconds(Int64(roundTrip * 1e9))) }
            _ = sizer.endPeriod(elapsed: WindowSizer.period)
            sizes.append(sizer.size)
        }
        return sizes
    }

    @Test func aServerThatIsTheLimitDoesNotDriveTheWindowToTheCeiling() {
        // A starved server (a CPU-bound sandbox, a throttling APNs): 7,000/s after 5 ms. 35 in flight
        // are enough; the measured round trip grows with the window itself (the server's queue), and
        // a window sized from it alone doubled every period up to the ceiling and stayed there.
        var sizer = WindowSizer(floor: 1000, ceiling: 10_000)
        let sizes = Self.simulateServerBound(&sizer, latency: .milliseconds(5), serverRate: 7000, periods: 400)
        // Every 20 s the window goes to the floor until the queue it built has drained, and the
        // round trip seen then (the floor's own queue: 1000 / 7000 s) sizes it: 2 × 7000 × 0.143 = 2000.
        #expect(sizes.suffix(100).max()! <= 2000, "\(sizes.suffix(100))")
        #expect(sizes.suffix(100).min()! >= 1000)
    }

    @Test func roundTripsThatStayShortAreNeverProbed() {
        // Apple's 150 ms, push-send's CPU the limit: the round trip is confirmed every period, so the
        // window never drops to the floor after it has grown.
        var sizer = WindowSizer(floor: 256, ceiling: 10_000)
        let sizes = Self.simulate(&sizer, roundTrip: .milliseconds(150), cpuRate: 30_000, periods: 300)
        #expect(sizes.suffix(250).allSatisfy { $0 == 9000 }, "\(sizes)")
    }

    @Test func floorAndCeilingAreSane() {
        let sizer = WindowSizer(floor: 500, ceiling: 20)
        #expect(sizer.floor == 20 && sizer.ceiling == 20 && sizer.size == 20)
        #expect(WindowSizer(floor: 0, ceiling: 0).size == 1)
    }

    @Test func theWindowFollowsItsSizerAndAdmitsWaitersWhenItGrows() async throws {
        let sizes = ArrivalOrder()
        let window = SendWindow(floor: 1, ceiling: 8) { sizes.append($0) }
        #expect(sizes.values == [1])
        await window.acquire()
        let waiting = Task { await window.acquire() }
        try await Task.sleep(for: .milliseconds(20))
        #expect(window.inUse == 1)
        // A period passes with the window full: it doubles, and the waiter gets a place.
        try await Task.sleep(for: WindowSizer.period)
        window.release(holding: .seconds(2))
        await waiting.value
        #expect(window.size == 2 && sizes.values == [1, 2])
        #expect(window.inUse == 1)
    }
}

private final class ArrivalOrder: Sendable {
    private let storage = Mutex<[Int]>([])
    func append(_ value: Int) { storage.withLock { $0.append(value) } }
    var values: [Int] { storage.withLock { $0 } }
}
