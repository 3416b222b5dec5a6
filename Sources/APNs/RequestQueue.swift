import NIOConcurrencyHelpers
import Synchronization

/// Requests waiting for a stream, shared by the client's connections: bounded (a full queue is
/// back-pressure for the caller, never unbounded memory), first in first out, with requests that
/// must go again (refused or GOAWAY'd unprocessed) put back at the front.
///
/// Every connection's I/O thread and every sender touch it, so it is the client's one contended lock.
/// It is NIO's `pthread_mutex` lock rather than `Synchronization.Mutex`: on Linux (Swift 6.3) the
/// latter is a priority-inheritance futex that hands the lock from waiter to waiter through the
/// kernel, and under contention push-send spent 36% of its CPU in it (79 µs a notification on a
/// 1,000,000-token broadcast against 24 with one connection). How many are queued is mirrored in
/// an atomic, so the checks a connection makes on every pass take no lock.
final class RequestQueue: Sendable {
    private struct State {
        var ring = Ring()
        var closed = false
        /// No queued request has a deadline before this (monotonic ns); sweeps skip until then.
        var earliestDeadline = UInt64.max
    }

    let capacity: Int
    private let state: NIOLockedValueBox<State>
    /// `ring.count`, written under the lock, read without it (sequentially consistent: a connection
    /// marks itself asleep, then looks; a sender queues, then looks for a sleeper).
    private let queued = Atomic<Int>(0)

    init(capacity: Int) {
        precondition(capacity > 0, "the request queue needs room for at least one request")
        self.capacity = capacity
        state = NIOLockedValueBox(State())
    }

    enum EnqueueResult {
        case queued
        case full
        case closed
    }

    /// Appends a new request unless the queue is full or closed.
    func enqueue(_ request: PendingRequest) -> EnqueueResult {
        state.withLockedValue { state in
            if state.closed { return .closed }
            if state.ring.count >= capacity { return .full }
            state.ring.append(request)
            state.earliestDeadline = min(state.earliestDeadline, request.deadline)
            queued.store(state.ring.count, ordering: .sequentiallyConsistent)
            return .queued
        }
    }

    /// Puts requests back at the front, in order (they were sent before anything still queued). The
    /// bound does not apply: they were already admitted. Returns false when the queue is closed (the
    /// caller fails them).
    func requeue(_ requests: [PendingRequest]) -> Bool {
        guard !requests.isEmpty else { return true }
        return state.withLockedValue { state in
            if state.closed { return false }
            for request in requests.reversed() {
                state.ring.prepend(request)
                state.earliestDeadline = min(state.earliestDeadline, request.deadline)
            }
            queued.store(state.ring.count, ordering: .sequentiallyConsistent)
            return true
        }
    }

    /// Takes up to `limit` requests from the front.
    func take(_ limit: Int) -> [PendingRequest] {
        guard limit > 0 else { return [] }
        return state.withLockedValue { state in
            var taken: [PendingRequest] = []
            taken.reserveCapacity(min(limit, state.ring.count))
            while taken.count < limit, let request = state.ring.popFirst() {
                taken.append(request)
            }
            if state.ring.count == 0 { state.earliestDeadline = .max }
            queued.store(state.ring.count, ordering: .sequentiallyConsistent)
            return taken
        }
    }

    /// Whether nothing waits, without taking the lock (a request queued at this moment may be missed;
    /// its sender wakes a connection).
    var isEmpty: Bool { queued.load(ordering: .sequentiallyConsistent) == 0 }

    /// When the request at the front was created (monotonic ns); nil when the queue is empty.
    func oldestEnqueuedAt() -> UInt64? {
        guard !isEmpty else { return nil }
        return state.withLockedValue { $0.ring.first?.createdAt }
    }

    var count: Int { queued.load(ordering: .sequentiallyConsistent) }

    /// Removes and returns every request whose deadline passed (cheap when none can have).
    func removeExpired(now: UInt64) -> [PendingRequest] {
        state.withLockedValue { state in
            guard now >= state.earliestDeadline else { return [] }
            var expired: [PendingRequest] = []
            var kept = Ring()
            var earliest = UInt64.max
            while let request = state.ring.popFirst() {
                if request.deadline <= now {
                    expired.append(request)
                } else {
                    kept.append(request)
                    earliest = min(earliest, request.deadline)
                }
            }
            state.ring = kept
            state.earliestDeadline = earliest
            queued.store(state.ring.count, ordering: .sequentiallyConsistent)
            return expired
        }
    }

    /// Removes and returns everything queued (the caller fails them).
    func removeAll() -> [PendingRequest] {
        state.withLockedValue { state in
            var all: [PendingRequest] = []
            while let request = state.ring.popFirst() { all.append(request) }
            state.earliestDeadline = .max
            queued.store(0, ordering: .sequentiallyConsistent)
            return all
        }
    }

    /// Refuses new and requeued requests from now on and returns what was queued.
    func close() -> [PendingRequest] {
        state.withLockedValue { state in
            state.closed = true
            var all: [PendingRequest] = []
            while let request = state.ring.popFirst() { all.append(request) }
            state.earliestDeadline = .max
            queued.store(0, ordering: .sequentiallyConsistent)
            return all
        }
    }
}

/// A growable ring buffer of requests: O(1) at both ends.
private struct Ring {
    private var storage: [PendingRequest?] = Array(repeating: nil, count: 64)
    private var head = 0
    private(set) var count = 0

    mutating func append(_ request: PendingRequest) {
        if count == storage.count { grow() }
        storage[(head + count) % storage.count] = request
        count += 1
    }

    mutating func prepend(_ request: PendingRequest) {
        if count == storage.count { grow() }
        head = (head - 1 + storage.count) % storage.count
        storage[head] = request
        count += 1
    }

    var first: PendingRequest? { count > 0 ? storage[head] : nil }

    mutating func popFirst() -> PendingRequest? {
        guard count > 0 else { return nil }
        let request = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
        count -= 1
        return request
    }

    private mutating func grow() {
        var bigger: [PendingRequest?] = Array(repeating: nil, count: storage.count * 2)
        for index in 0..<count { bigger[index] = storage[(head + index) % storage.count] }
        storage = bigger
        head = 0
    }
}
