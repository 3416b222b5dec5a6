import Glibc

/// Monotonic time in nanoseconds (`CLOCK_MONOTONIC`), for deadlines and timers on I/O threads that
/// wall-clock changes cannot move. A plain integer, so state machines take `now` as a value.
@inline(__always)
public func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

extension Duration {
    /// Whole nanoseconds, saturating: negative durations count as zero, huge ones as `UInt64.max`.
    public var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return .max }
        let (sum, carried) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return carried ? .max : sum
    }
}
