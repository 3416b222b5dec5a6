import Metrics
import Synchronization

/// push-feedback's metrics (swift-metrics; Prometheus on `/metrics` through the service kit):
///
/// - `push_feedback_events_total{outcome}`: `push.feedback` deliveries by what came of them —
///   `removed`, `kept` (registered again after the report), `not_found`, `malformed` (dead-lettered),
///   `refused` (the registry refused it for good: dead-lettered), `retried` (Redis unavailable: sent to
///   a retry tier), `requeued` (a publish failed: back to the queue).
/// - `push_feedback_tokens_removed_total{reason}`: tokens removed, by reason (`Unregistered`,
///   `BadDeviceToken`, …, `Stale` from the sweep), whoever removed them.
/// - `push_feedback_batch_size`: events per processed batch (a histogram; near the batch size under load).
/// - `push_feedback_sweep_tokens_scanned_total`, `push_feedback_sweep_passes_total`: the stale sweep's
///   progress; `push_feedback_sweep_last_pass_timestamp_seconds{app}`: when the app's last pass ended.
public final class FeedbackMetrics: Sendable {
    private let events: [Outcome: Counter]
    private let removed = Mutex<[String: Counter]>([:])
    private let batchSizes = Recorder(label: "push_feedback_batch_size", aggregate: true)
    private let sweepScanned = Counter(label: "push_feedback_sweep_tokens_scanned_total")
    private let sweepPasses = Counter(label: "push_feedback_sweep_passes_total")
    private let sweepCompleted = Mutex<[String: Gauge]>([:])

    /// What came of one `push.feedback` delivery.
    enum Outcome: String, CaseIterable, Sendable {
        case removed
        case kept
        case notFound = "not_found"
        case malformed
        case refused
        case retried
        case requeued
    }

    public init() {
        var events: [Outcome: Counter] = [:]
        for outcome in Outcome.allCases {
            events[outcome] = Counter(label: "push_feedback_events_total", dimensions: [("outcome", outcome.rawValue)])
        }
        self.events = events
    }

    func count(_ outcome: Outcome, _ amount: Int = 1) {
        guard amount > 0 else { return }
        events[outcome]?.increment(by: amount)
    }

    /// Counts one removed token.
    public func removedToken(reason: String) {
        let counter = removed.withLock { counters in
            if let counter = counters[reason] { return counter }
            let counter = Counter(label: "push_feedback_tokens_removed_total", dimensions: [("reason", reason)])
            counters[reason] = counter
            return counter
        }
        counter.increment()
    }

    func batch(size: Int) {
        batchSizes.record(size)
    }

    func sweepScanned(_ count: Int) {
        guard count > 0 else { return }
        sweepScanned.increment(by: count)
    }

    func sweepPassCompleted(app: String, atSeconds seconds: Double) {
        sweepPasses.increment()
        let gauge = sweepCompleted.withLock { gauges in
            if let gauge = gauges[app] { return gauge }
            let gauge = Gauge(label: "push_feedback_sweep_last_pass_timestamp_seconds", dimensions: [("app", app)])
            gauges[app] = gauge
            return gauge
        }
        gauge.record(seconds)
    }
}
