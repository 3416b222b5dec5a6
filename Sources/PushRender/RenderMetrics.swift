import Metrics
import PushCore
import Synchronization

/// push-render's metrics (swift-metrics; Prometheus on `/metrics` through the service kit):
///
/// - `push_render_requests_total{outcome}`: requests by outcome — `rendered`, `invalid` (dead-lettered),
///   `duplicate` (a request id already rendered), `retried` (Redis unavailable or another instance busy
///   with it: sent to a retry tier), `gave_up` (dead-lettered after every retry), `requeued` (shutdown or broker trouble mid-fan-out; resumes later);
/// - `push_render_batches_published_total`: send batches confirmed by the broker;
/// - `push_render_tokens_targeted_total`: tokens put into send batches;
/// - `push_render_devices_skipped_total{reason}`: devices that got nothing — `nothing_to_show` (their
///   settings disabled every part), `unregistered` (gone between scan and lookup), `unreadable_record`,
///   `duplicate` (a token the scan returned twice);
/// - `push_render_localization_fallbacks_total`: notifications sent with at least one key left to the
///   device because no catalog along the device's chain had it (`localize: "server"`);
/// - `push_render_truncated_total`: notifications whose alert body was shortened to fit;
/// - `push_render_request_duration_seconds`: time from a request's start to its ack.
final class RenderMetrics: Sendable {
    private let requests = Mutex<[String: Counter]>([:])
    private let skips = Mutex<[String: Counter]>([:])
    let batchesPublished = Counter(label: "push_render_batches_published_total")
    let tokensTargeted = Counter(label: "push_render_tokens_targeted_total")
    let localizationFallbacks = Counter(label: "push_render_localization_fallbacks_total")
    let truncated = Counter(label: "push_render_truncated_total")
    let requestDuration = Timer(label: "push_render_request_duration_seconds")

    func request(_ outcome: String) {
        counter(in: requests, label: "push_render_requests_total", dimension: "outcome", value: outcome).increment()
    }

    func skipped(_ reason: String, count: Int) {
        guard count > 0 else { return }
        counter(in: skips, label: "push_render_devices_skipped_total", dimension: "reason", value: reason).increment(by: count)
    }

    private func counter(in table: borrowing Mutex<[String: Counter]>, label: String, dimension: String, value: String) -> Counter {
        table.withLock { counters in
            if let counter = counters[value] { return counter }
            let counter = Counter(label: label, dimensions: [(dimension, value)])
            counters[value] = counter
            return counter
        }
    }
}
