import Logging
import Synchronization

/// Writes the ``DeliveryLedger`` marks as APNs' 200s arrive, not when a batch ends, so a `kill -9`
/// leaves unmarked only what was accepted in the last moment (the duplicates of a restart); and the
/// claims of at-most-once apps right before their notifications go out.
///
/// Every mark is queued with ``mark(key:bit:then:)`` (or ``mark(key:bit:)``); one flusher at a time
/// sends everything queued as one pipeline and loops until the queue is empty, so marks coalesce under
/// load and go out at once when idle. The action given with a mark runs once it is written, so a
/// notification settles (and its batch is acked) only after its mark is in Redis. A failed write is
/// logged and dropped: the marks only bound duplicates, they never gate delivery.
///
/// Called from the APNs client's connection threads for every accepted notification, so each call
/// takes the lock once and a flush hands out only the actions it made ready (they are kept in
/// sequence order).
final class AcceptanceMarker: Sendable {
    private struct Waiter {
        let through: UInt64
        let action: @Sendable () -> Void
    }

    private struct State {
        var pending: [(key: String, bit: Int)] = []
        var isFlushing = false
        /// Sequence number of the last queued mark, and of the last one written (or dropped).
        var queued: UInt64 = 0
        var written: UInt64 = 0
        /// In `through` order from `head` on.
        var waiters: [Waiter] = []
        var head = 0

        /// Queues a mark; returns its sequence number and whether a flusher must start.
        mutating func queue(key: String, bit: Int) -> (UInt64, Bool) {
            pending.append((key, bit))
            queued += 1
            let start = !isFlushing
            isFlushing = true
            return (queued, start)
        }

        /// Adds a waiter, keeping the order (appended in the common case).
        mutating func wait(_ waiter: Waiter) {
            if let last = waiters.last, waiters.count > head, last.through > waiter.through {
                let index = waiters[head...].firstIndex { $0.through > waiter.through } ?? waiters.count
                waiters.insert(waiter, at: index)
            } else {
                waiters.append(waiter)
            }
        }

        /// Removes and returns the waiters `written` made ready.
        mutating func takeReady() -> ArraySlice<Waiter> {
            let start = head
            while head < waiters.count, waiters[head].through <= written { head += 1 }
            let ready = waiters[start..<head]
            if head > 1024, head * 2 > waiters.count {
                let result = Array(ready)
                waiters.removeFirst(head)
                head = 0
                return result[...]
            }
            return ready
        }
    }

    private let ledger: DeliveryLedger
    private let logger: Logger
    private let state = Mutex(State())

    init(ledger: DeliveryLedger, logger: Logger) {
        self.ledger = ledger
        self.logger = logger
    }

    /// Queues setting `bit` of the mark set `key` (``DeliveryMarks/acceptedBit(slot:)`` or
    /// ``DeliveryMarks/claimedBit(slot:)``) and returns its sequence number.
    @discardableResult
    func mark(key: String, bit: Int) -> UInt64 {
        let (sequence, startFlusher) = state.withLock { $0.queue(key: key, bit: bit) }
        if startFlusher { Task { await self.flush() } }
        return sequence
    }

    /// Queues a mark and runs `action` once it is written (or its write failed).
    func mark(key: String, bit: Int, then action: @escaping @Sendable () -> Void) {
        let startFlusher = state.withLock { state -> Bool in
            let (sequence, start) = state.queue(key: key, bit: bit)
            state.wait(Waiter(through: sequence, action: action))
            return start
        }
        if startFlusher { Task { await self.flush() } }
    }

    /// Returns once every mark up to `sequence` is written (or its write failed).
    func waitUntilWritten(through sequence: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.written >= sequence { return true }
                state.wait(Waiter(through: sequence) { continuation.resume() })
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func flush() async {
        while true {
            let (marks, through) = state.withLock { state -> ([(key: String, bit: Int)], UInt64) in
                defer { state.pending.removeAll(keepingCapacity: true) }
                if state.pending.isEmpty { state.isFlushing = false }
                return (state.pending, state.queued)
            }
            if marks.isEmpty { return }
            do {
                try await ledger.write(marks, value: true)
            } catch {
                logger.warning(
                    "could not mark accepted notifications in Redis (a redelivery may duplicate them)",
                    metadata: ["push.error": "\(error)", "push.marks": "\(marks.count)"]
                )
            }
            let ready = state.withLock { state -> ArraySlice<Waiter> in
                state.written = through
                return state.takeReady()
            }
            for waiter in ready { waiter.action() }
        }
    }
}
