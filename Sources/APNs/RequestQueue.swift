import Synchronization

/// Requests waiting for a stream, shared by the client's connections: bounded (a full queue is
/// back-pressure for the caller, never unbounded memory), first in first out, with requests that
/// must go again (refused or GOAWAY'd unprocessed) put back at the front.
final class RequestQueue: Sendable {
    private struct State {
        var ring = Ring()
        var closed = false
        /// No queued request has a deadline before this (monotonic ns); sweeps skip until then.
        var earliestDeadline = UInt64.max
    }

    let capacity: Int
    private let state: Mutex<State>

    init(capacity: Int) {
        precondition(capacity > 0, "the request queue needs room for at least one request")
        self.capacity = capacity
        state = Mutex(State())
    }

    enum EnqueueResult {
        case queued
        case full
        case closed
    }

    /// Appends a new request unless the queue is full or closed.
    func enqueue(_ request: PendingRequest) -> EnqueueResult {
        state.withLock { state in
            if state.closed { return .closed }
            if state.ring.count >= capacity { return .full }
            state.ring.append(request)
            state.earliestDeadline = min(state.earliestDeadline, request.deadline)
            return .queued
        }
    }

    /// Puts requests back at the front, in order (they were sent before anything still queued). The
    /// bound does not apply: they were already admitted. Returns false when the queue is closed (the
    /// caller fails them).
    func requeue(_ requests: [PendingRequest]) -> Bool {
        guard !requests.isEmpty else { return true }
        return state.withLock { state in
            if state.closed { return false }
            for request in requests.reversed() {
                state.ring.prepend(request)
                state.earliestDeadline = min(state.earliestDeadline, request.deadline)
            }
            return true
        }
    }

    /// Takes up to `limit` requests from the front.
    func take(_ limit: Int) -> [PendingRequest] {
        guard limit > 0 else { return [] }
        return state.withLock { state in
            var taken: [PendingRequest] = []
            taken.reserveCapacity(min(limit, state.ring.count))
            while taken.count < limit, let request = state.ring.popFirst() {
                taken.append(request)
            }
            if state.ring.count == 0 { state.earliestDeadline = .max }
            return taken
        }
    }

    var isEmpty: Bool { state.withLock { $0.ring.count == 0 } }

    /// When the request at the front was created (monotonic ns); nil when the queue is empty.
    func oldestEnqueuedAt() -> UInt64? { state.withLock { $0.ring.first?.createdAt } }
    var count: Int { state.withLock { $0.ring.count } }

    /// Removes and returns every request whose deadline passed (cheap when none can have).
    func removeExpired(now: UInt64) -> [PendingRequest] {
        state.withLock { state in
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
            return expired
        }
    }

    /// Removes and returns everything queued (the caller fails them).
    func removeAll() -> [PendingRequest] {
        state.withLock { state in
            var all: [PendingRequest] = []
            while let request = state.ring.popFirst() { all.append(request) }
            state.earliestDeadline = .max
            return all
        }
    }

    /// Refuses new and requeued requests from now on and returns what was queued.
    func close() -> [PendingRequest] {
        state.withLock { state in
            state.closed = true
            var all: [PendingRequest] = []
            while let request = state.ring.popFirst() { all.append(request) }
            state.earliestDeadline = .max
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
