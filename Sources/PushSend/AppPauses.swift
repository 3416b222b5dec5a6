import Synchronization

/// Apps whose sending is paused because APNs refused their credentials, and until when.
///
/// While an app is paused its batches are not sent: they are republished to a retry tier at least as
/// long as the pause and acked at once, so a paused app never holds the consumer's prefetch that other
/// apps need. Times are the caller's (ms, monotonic or wall: only differences matter).
public final class AppPauses: Sendable {
    private let pausedUntil = Mutex<[String: Int64]>([:])

    public init() {}

    /// Pauses `app` until `now + duration` (extends an earlier pause, never shortens it). Returns
    /// whether the app was not paused before, so the caller logs a new pause once.
    @discardableResult
    public func pause(_ app: String, for duration: Duration, now: Int64) -> Bool {
        let until = now + RetryPolicy.milliseconds(duration)
        return pausedUntil.withLock { paused in
            let wasPaused = (paused[app] ?? .min) > now
            paused[app] = Swift.max(paused[app] ?? .min, until)
            return !wasPaused
        }
    }

    /// How long `app` stays paused after `now`; nil when it is not paused.
    public func remaining(_ app: String, now: Int64) -> Duration? {
        pausedUntil.withLock { paused in
            guard let until = paused[app] else { return nil }
            if until <= now {
                paused[app] = nil
                return nil
            }
            return .milliseconds(until - now)
        }
    }

    /// The apps paused at `now` (for the metric).
    public func pausedApps(now: Int64) -> [String] {
        pausedUntil.withLock { paused in paused.filter { $0.value > now }.map(\.key).sorted() }
    }
}
