import Synchronization
import Testing

@testable import PushSend

/// The bound on notifications sent and not yet settled: what a kill -9 can repeat.
@Suite struct SendWindowTests {
    @Test func placesAreHandedOutUpToTheSizeThenInArrivalOrder() async throws {
        let window = SendWindow(size: 2)
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
        window.release()
        await first.value
        #expect(order.values == [1])
        window.release()
        await second.value
        #expect(order.values == [1, 2])
        #expect(window.inUse == 2)
        window.release()
        window.release()
        #expect(window.inUse == 0)
    }
}

private final class ArrivalOrder: Sendable {
    private let storage = Mutex<[Int]>([])
    func append(_ value: Int) { storage.withLock { $0.append(value) } }
    var values: [Int] { storage.withLock { $0 } }
}
