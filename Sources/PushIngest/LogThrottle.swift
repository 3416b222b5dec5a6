import Synchronization

/// Lets one log line through per ``interval`` and counts the ones it holds back, so a failure that hits
/// every request (Redis down at 10,000 requests/s) is logged once a second, not 10,000 times.
final class LogThrottle: Sendable {
    let interval: Duration
    private let state = Mutex<(last: ContinuousClock.Instant?, suppressed: Int)>((nil, 0))

    init(interval: Duration) {
        self.interval = interval
    }

    /// Whether to log now: the number of lines held back since the last one let through, or nil to
    /// hold this one back too.
    func admit(now: ContinuousClock.Instant) -> Int? {
        state.withLock { state in
            if let last = state.last, now - last < interval {
                state.suppressed += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.suppressed
        }
    }
}
