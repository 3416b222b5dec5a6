/// A min-heap of timers by deadline (the event loop's delayed answers).
struct DeadlineHeap<Element> {
    private var entries: [(deadline: UInt64, sequence: UInt64, element: Element)] = []
    /// Breaks ties so equal deadlines fire in insertion order.
    private var sequence: UInt64 = 0

    var isEmpty: Bool { entries.isEmpty }
    var nextDeadline: UInt64? { entries.first?.deadline }

    mutating func insert(_ element: Element, deadline: UInt64) {
        sequence &+= 1
        entries.append((deadline, sequence, element))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(child, parent) else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// The earliest element whose deadline is at or before `now`, removed; nil when none is due.
    mutating func popDue(now: UInt64) -> Element? {
        guard let first = entries.first, first.deadline <= now else { return nil }
        let last = entries.removeLast()
        guard !entries.isEmpty else { return first.element }
        entries[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count, precedes(left, smallest) { smallest = left }
            if right < entries.count, precedes(right, smallest) { smallest = right }
            guard smallest != parent else { break }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
        return first.element
    }

    private func precedes(_ a: Int, _ b: Int) -> Bool {
        (entries[a].deadline, entries[a].sequence) < (entries[b].deadline, entries[b].sequence)
    }
}
