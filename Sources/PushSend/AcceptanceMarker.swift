import Logging
import Synchronization

/// Writes the ``DeliveryLedger`` marks as APNs' 200s arrive, not when a batch ends, so a `kill -9`
/// leaves unmarked only what was accepted in the last moment (the duplicates of a restart); and the
/// claims of at-most-once apps right before their notifications go out.
///
/// Every answer is queued with ``mark(_:)``; one flusher at a time sends everything queued as one
/// pipeline and loops until the queue is empty, so marks coalesce under load and go out at once when
/// idle. ``whenWritten(through:_:)`` and ``waitUntilWritten(through:)`` let a notification settle
/// (and so its batch be acked) only after its mark is written. A failed
/// write is logged and dropped: the marks only bound duplicates, they never gate delivery.
final class AcceptanceMarker: Sendable {
    private struct State {
        var pending: [(key: String, bit: Int)] = []
        var isFlushing = false
        /// Sequence number of the last queued mark, and of the last one written (or dropped).
        var queued: UInt64 = 0
        var written: UInt64 = 0
        var waiters: [(through: UInt64, action: @Sendable () -> Void)] = []
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
        let (sequence, startFlusher) = state.withLock { state -> (UInt64, Bool) in
            state.pending.append((key, bit))
            state.queued += 1
            let start = !state.isFlushing
            state.isFlushing = true
            return (state.queued, start)
        }
        if startFlusher {
            Task { await self.flush() }
        }
        return sequence
    }

    /// Returns once every mark up to `sequence` is written (or its write failed).
    func waitUntilWritten(through sequence: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            whenWritten(through: sequence) { continuation.resume() }
        }
    }

    /// Runs `action` once every mark up to `sequence` is written (or its write failed): at once if
    /// they are, else on the flusher's task after the pipeline that writes them.
    func whenWritten(through sequence: UInt64, _ action: @escaping @Sendable () -> Void) {
        let done = state.withLock { state -> Bool in
            if state.written >= sequence { return true }
            state.waiters.append((sequence, action))
            return false
        }
        if done { action() }
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
            let ready = state.withLock { state -> [@Sendable () -> Void] in
                state.written = through
                let ready = state.waiters.filter { $0.through <= through }.map(\.action)
                state.waiters.removeAll { $0.through <= through }
                return ready
            }
            for action in ready { action() }
        }
    }
}
