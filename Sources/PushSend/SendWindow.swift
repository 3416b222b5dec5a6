import Synchronization

/// Bounds the notifications "in the air": sent to APNs and not yet settled in this process (answer
/// classified and, when accepted, its dedupe mark written to Redis).
///
/// That number is exactly what a `kill -9` can repeat: anything settled is skipped after a restart
/// and anything not yet sent is sent once. So the bound is no larger than throughput × APNs' round
/// trip needs: a ``WindowSizer`` resizes it as notifications settle, between a floor and a ceiling
/// (`PUSH_SEND_MIN_IN_FLIGHT`, `PUSH_SEND_MAX_IN_FLIGHT`). Waiters are served first come, first served.
final class SendWindow: Sendable {
    private struct State {
        var sizer: WindowSizer
        var inUse = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
        var head = 0
        var periodStarted: ContinuousClock.Instant

        /// Hands free places to waiters, first come first served.
        mutating func admit(into ready: inout [CheckedContinuation<Void, Never>]) {
            while inUse < sizer.size, head < waiters.count {
                ready.append(waiters[head])
                head += 1
                inUse += 1
            }
            if head > 1024, head * 2 > waiters.count {
                waiters.removeFirst(head)
                head = 0
            }
        }
    }

    private let state: Mutex<State>
    /// Told the new size whenever it changes (the `push_send_window_size` gauge).
    private let onResize: @Sendable (Int) -> Void

    init(floor: Int, ceiling: Int, onResize: @escaping @Sendable (Int) -> Void = { _ in }) {
        let sizer = WindowSizer(floor: floor, ceiling: ceiling)
        state = Mutex(State(sizer: sizer, periodStarted: .now))
        self.onResize = onResize
        onResize(sizer.size)
    }

    /// Waits for a free place (not cancellable: a place is always freed by a settling notification).
    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.inUse < state.sizer.size, state.head == state.waiters.count {
                    state.inUse += 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Waits for a free place, then takes as many more as are free right now (none while others
    /// wait), `limit` in all at most; returns how many it took (at least 1).
    func acquire(upTo limit: Int) async -> Int {
        await acquire()
        guard limit > 1 else { return 1 }
        let extra = state.withLock { state -> Int in
            guard state.head == state.waiters.count else { return 0 }
            let taken = Swift.min(Swift.max(0, state.sizer.size - state.inUse), limit - 1)
            state.inUse += taken
            return taken
        }
        return 1 + extra
    }

    /// Frees a place, handing it, and any the window grew by, to the longest waiters. `holding` is
    /// the notification's APNs round trip (nil when it got no answer), for the ``WindowSizer``.
    func release(holding: Duration?) {
        let now = ContinuousClock.now
        var ready: [CheckedContinuation<Void, Never>] = []
        let resized = state.withLock { state -> Int? in
            state.inUse -= 1
            state.sizer.settled(holding: holding)
            var resized: Int?
            let elapsed = now - state.periodStarted
            if elapsed >= WindowSizer.period {
                resized = state.sizer.endPeriod(elapsed: elapsed)
                state.periodStarted = now
            }
            state.admit(into: &ready)
            return resized
        }
        for waiter in ready { waiter.resume() }
        if let resized { onResize(resized) }
    }

    /// The window's size now.
    var size: Int { state.withLock { $0.sizer.size } }

    /// Places in use now (for tests and metrics).
    var inUse: Int { state.withLock { $0.inUse } }
}
