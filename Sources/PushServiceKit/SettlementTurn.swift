import Synchronization

/// A batch's place in the order batches were taken: ``waitForEarlierBatches()`` returns once every
/// batch taken before this one has finished its work (settled). ``BoundedConsumer`` hands one to each
/// batch; ``DeliverySettler`` waits on it before a `multiple` ack, which must never cover a delivery
/// an earlier batch is still working on.
public struct SettlementTurn: Sendable {
    let earlier: OneShotGate?
    let own = OneShotGate()

    init(after earlier: OneShotGate?) {
        self.earlier = earlier
    }

    /// Returns once every earlier batch has finished.
    public func waitForEarlierBatches() async {
        await earlier?.wait()
    }
}

/// Opens once; everyone waiting, and everyone who waits later, goes on. Batches use it to settle
/// their deliveries in the order they were received.
final class OneShotGate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if isOpen { continuation.resume() }
        }
    }
}
