import Synchronization

/// One copy of a send batch at a time in this process, per mark set.
///
/// When the broker connection drops, the broker requeues every unacked batch and delivers it again
/// while the first copy may still have notifications in flight. Were the second copy to read the
/// delivery marks then, it would send those again. So the second copy waits here until the first
/// has settled every notification it sent (and written their marks), and then reads the marks: a live
/// process never repeats what it knows it sent. Waiters are served in arrival order.
final class MarkSetLocks: Sendable {
    private let waiters = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])

    /// Returns once no other copy of `markKey` is being processed here.
    func lock(_ markKey: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = waiters.withLock { waiters -> Bool in
                guard waiters[markKey] != nil else {
                    waiters[markKey] = []
                    return true
                }
                waiters[markKey]!.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Lets the next waiting copy of `markKey` in.
    func unlock(_ markKey: String) {
        let next = waiters.withLock { waiters -> CheckedContinuation<Void, Never>? in
            guard var queue = waiters[markKey] else { return nil }
            guard !queue.isEmpty else {
                waiters[markKey] = nil
                return nil
            }
            let first = queue.removeFirst()
            waiters[markKey] = queue
            return first
        }
        next?.resume()
    }

    /// Mark sets locked now (for tests).
    var count: Int { waiters.withLock { $0.count } }
}
