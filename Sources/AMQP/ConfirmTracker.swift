/// Publishes on one confirm-mode channel that the broker has not yet confirmed.
///
/// Pure bookkeeping, no I/O: the broker numbers publishes 1, 2, 3… per channel and answers with
/// `basic.ack`/`basic.nack` for one tag or, with `multiple`, for every tag up to it. A mandatory
/// publish that matched no queue first comes back as `basic.return`; ``markReturned(sequence:error:)``
/// records that so the following ack resolves it as a failure rather than a success.
struct ConfirmTracker<Pending> {
    fileprivate struct Entry {
        var pending: Pending
        var failure: AMQPError?
    }

    /// Slot i holds sequence number `firstSequence + i`; settled slots are nil until the front advances.
    fileprivate var slots: [Entry?] = []
    fileprivate var head = 0
    private var firstSequence: UInt64 = 1
    private(set) var count = 0

    /// The sequence number the next registered publish gets (the broker's delivery tag for it).
    var nextSequence: UInt64 { firstSequence + UInt64(slots.count - head) }

    var isEmpty: Bool { count == 0 }

    /// Records a publish that is about to be sent and returns its sequence number.
    mutating func register(_ pending: Pending) -> UInt64 {
        let sequence = nextSequence
        slots.append(Entry(pending: pending, failure: nil))
        count += 1
        return sequence
    }

    /// Marks a publish as returned unroutable; its confirm will settle it with `error`.
    mutating func markReturned(sequence: UInt64, error: AMQPError) {
        guard let index = index(of: sequence), slots[index] != nil else { return }
        slots[index]!.failure = error
    }

    /// Settles publishes the broker acked (`nack: false`) or nacked, for one tag or all up to it.
    mutating func settle(tag: UInt64, multiple: Bool, nack: Bool) -> [(Pending, Result<Void, AMQPError>)] {
        var settled: [(Pending, Result<Void, AMQPError>)] = []
        func result(_ entry: Entry, _ sequence: UInt64) -> Result<Void, AMQPError> {
            if let failure = entry.failure { return .failure(failure) }
            if nack {
                return .failure(AMQPError(.nacked, "the broker nacked publish \(sequence); it may not have been stored"))
            }
            return .success(())
        }
        if multiple {
            var sequence = firstSequence + UInt64(0)
            var index = head
            while index < slots.count, sequence <= tag {
                if let entry = slots[index] {
                    settled.append((entry.pending, result(entry, sequence)))
                    slots[index] = nil
                    count -= 1
                }
                index += 1
                sequence += 1
            }
        } else if let index = index(of: tag), let entry = slots[index] {
            settled.append((entry.pending, result(entry, tag)))
            slots[index] = nil
            count -= 1
        }
        compact()
        return settled
    }

    /// Removes every unsettled publish (the channel or connection is gone) and starts numbering at 1.
    mutating func removeAll() -> [Pending] {
        let remaining = slots[head...].compactMap { $0?.pending }
        self = ConfirmTracker()
        return remaining
    }

    private func index(of sequence: UInt64) -> Int? {
        guard sequence >= firstSequence else { return nil }
        let offset = sequence - firstSequence
        guard offset < UInt64(slots.count - head) else { return nil }
        return head + Int(offset)
    }

    fileprivate mutating func compact() {
        while head < slots.count, slots[head] == nil {
            head += 1
            firstSequence += 1
        }
        if head > 1024, head * 2 > slots.count {
            slots.removeFirst(head)
            head = 0
        }
    }
}

/// Something with a deadline (a publish that must be confirmed by then).
protocol Expiring {
    var deadline: ContinuousClock.Instant { get }
}

extension ConfirmTracker where Pending: Expiring {
    /// Removes the unconfirmed publishes whose deadline has passed (they count as unconfirmed: the
    /// caller fails them); a confirm arriving later for one is ignored. Publishes are registered in
    /// the order of their deadlines (one timeout from when they were queued), so this looks only at
    /// the oldest ones.
    mutating func expire(now: ContinuousClock.Instant) -> [Pending] {
        var expired: [Pending] = []
        var index = head
        while index < slots.count {
            if let entry = slots[index] {
                guard entry.pending.deadline <= now else { break }
                expired.append(entry.pending)
                slots[index] = nil
                count -= 1
            }
            index += 1
        }
        if !expired.isEmpty { compact() }
        return expired
    }
}
