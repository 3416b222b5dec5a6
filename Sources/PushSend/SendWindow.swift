import Synchronization

/// Bounds the notifications "in the air": sent to APNs and not yet settled in this process (answer
/// classified and, when accepted, its dedupe mark written to Redis).
///
/// That number is exactly what a `kill -9` can repeat: anything settled is skipped after a restart
/// and anything not yet sent is sent once. The APNs client keeps its connections busy from its own
/// threads, so without this bound a process short of CPU could have thousands of accepted but
/// unmarked notifications. Waiters are served first come, first served.
final class SendWindow: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
        var head = 0
    }

    private let state: Mutex<State>
    let size: Int

    init(size: Int) {
        self.size = Swift.max(1, size)
        state = Mutex(State(available: Swift.max(1, size)))
    }

    /// Waits for a free place (not cancellable: a place is always freed by a settling notification).
    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Frees a place, handing it to the longest waiter if any.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.head < state.waiters.count else {
                state.available += 1
                return nil
            }
            let waiter = state.waiters[state.head]
            state.head += 1
            if state.head > 1024, state.head * 2 > state.waiters.count {
                state.waiters.removeFirst(state.head)
                state.head = 0
            }
            return waiter
        }
        next?.resume()
    }

    /// Places in use now (for tests and metrics).
    var inUse: Int { state.withLock { size - $0.available } }
}
