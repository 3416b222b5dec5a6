import Synchronization

/// One holder at a time per key in this process; waiters are served in arrival order.
///
/// For work a broker may hand this process twice: when the connection drops, the broker requeues every
/// unacked message and delivers it again while the first copy may still be at work. The second copy
/// waits here until the first has finished what it started, then reads where it stands (push-send's
/// delivery marks, push-render's progress): a live process never repeats what it knows it did.
public final class KeyedLocks: Sendable {
    private let waiters = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])

    public init() {}

    /// Returns once nobody else in this process holds `key`; then the caller does.
    public func lock(_ key: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = waiters.withLock { waiters -> Bool in
                guard waiters[key] != nil else {
                    waiters[key] = []
                    return true
                }
                waiters[key]!.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Lets the next waiter for `key` in.
    public func unlock(_ key: String) {
        let next = waiters.withLock { waiters -> CheckedContinuation<Void, Never>? in
            guard var queue = waiters[key] else { return nil }
            guard !queue.isEmpty else {
                waiters[key] = nil
                return nil
            }
            let first = queue.removeFirst()
            waiters[key] = queue
            return first
        }
        next?.resume()
    }
}
