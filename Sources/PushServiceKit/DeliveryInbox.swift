import Synchronization

/// Deliveries received and not yet taken, for one taker that wants "everything ready, up to N".
///
/// ``BoundedConsumer``'s reader task ``put(_:)``s every delivery the consumer yields; its loop
/// ``take(max:)``s what has arrived, waiting only when nothing has. So a lone event is handled at once, and under load each
/// batch fills up to its size without any lingering timer. Bounded by the broker's prefetch: it never
/// holds more deliveries than are unacknowledged.
final class DeliveryInbox<Element: Sendable>: Sendable {
    private struct State {
        var buffer: [Element] = []
        var head = 0
        var finished = false
        var failure: (any Error)?
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    func put(_ element: Element) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.buffer.append(element)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// No more elements will come; `failure` is what ended the source, if it failed.
    func finish(failure: (any Error)? = nil) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.finished = true
            state.failure = state.failure ?? failure
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// What ended the source, once it has ended.
    var failure: (any Error)? { state.withLock { $0.failure } }

    /// Up to `max` elements in arrival order, waiting while there are none; nil once finished and
    /// drained. One caller at a time.
    func take(max: Int) async -> [Element]? {
        while true {
            let step = state.withLock { state -> TakeStep<Element> in
                let available = state.buffer.count - state.head
                if available > 0 {
                    let end = state.head + Swift.min(max, available)
                    let elements = Array(state.buffer[state.head..<end])
                    state.head = end
                    if state.head == state.buffer.count {
                        state.buffer.removeAll(keepingCapacity: true)
                        state.head = 0
                    }
                    return .elements(elements)
                }
                return state.finished ? .done : .wait
            }
            switch step {
            case .elements(let elements): return elements
            case .done: return nil
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state -> Bool in
                        if state.buffer.count > state.head || state.finished { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }
}

private enum TakeStep<Element> {
    case elements([Element])
    case done
    case wait
}
