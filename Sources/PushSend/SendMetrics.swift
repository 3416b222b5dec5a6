import Metrics
import Synchronization

/// push-send's metrics (swift-metrics; Prometheus on `/metrics` through the service kit):
///
/// - `push_send_notifications_sent_total`: requests sent to APNs (every try counts);
/// - `push_send_delivered_total{app}`: notifications APNs accepted, by app (a bundle id of the apps
///   file: batches of apps it does not name are dead-lettered before they count, so the label's values
///   are bounded by the apps file; never a token or user);
/// - `push_send_failed_total{app,reason}`: notifications that ended without delivery (invalid token,
///   permanent refusal, expired, dropped, out of tries), by app and reason;
/// - `push_send_retries_total{reason}`: notifications republished to a retry tier for another attempt;
/// - `push_send_rate_limited_total{action}`: notifications over a rate limit, `deferred` or `dropped`;
/// - `push_send_deferred_total{reason}`: notifications republished without counting an attempt;
/// - `push_send_duplicates_skipped_total`: notifications not sent again because APNs already accepted them;
/// - `push_send_in_flight`: notifications of the batches in progress not answered yet (waiting for a
///   place in the send window, or for APNs);
/// - `push_send_apns_latency_seconds`: a histogram of APNs' answer times;
/// - `push_send_open_connections`: HTTP/2 connections open to APNs (all apps);
/// - `push_send_apns_goaways_total{app,reason}`: GOAWAYs APNs sent, by the reason in the frame
///   (a documented reason, `none`, or `other`; ``APNs/APNsGoaway/metricLabel``);
/// - `push_send_batches_total{outcome}`: batches settled: `acked`, `requeued` (broker trouble or
///   shutdown), `invalid` (dead-lettered as unreadable), `paused` (republished while their app was paused);
/// - `push_send_credential_failures_total{app}` and `push_send_app_paused{app}` (1 while paused);
/// - `push_credential_expiry_days{app,environment}`: days until a certificate-auth app's certificate
///   expires (negative once it has), set when its client is made and every hour after
///   (``CredentialExpiryWatch``).
///
/// Labelled handles are created once per label value and kept.
final class SendMetrics: Sendable {
    let sent = Counter(label: "push_send_notifications_sent_total")
    let duplicatesSkipped = Counter(label: "push_send_duplicates_skipped_total")
    let latency = Timer(label: "push_send_apns_latency_seconds")
    let openConnections = Gauge(label: "push_send_open_connections")
    private let inFlightGauge = Gauge(label: "push_send_in_flight")
    /// The in-flight window's size now (``WindowSizer``): what a `kill -9` can repeat at most.
    private let windowSizeGauge = Gauge(label: "push_send_window_size")
    private let inFlightCount = Atomic<Int>(0)
    private let labelled = Mutex<[String: Counter]>([:])
    private let expiryGauges = Mutex<[String: Gauge]>([:])
    private let pausedGauges = Mutex<[String: Gauge]>([:])

    init() {}

    func windowSize(_ size: Int) {
        windowSizeGauge.record(size)
    }

    private func counter(_ label: String, _ dimension: String, _ value: String) -> Counter {
        counter(label, [(dimension, value)])
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> Counter {
        let key = ([label] + dimensions.map { "\($0.0)=\($0.1)" }).joined(separator: "|")
        return labelled.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: label, dimensions: dimensions)
            counters[key] = counter
            return counter
        }
    }

    func delivered(app: String, count: Int) {
        counter("push_send_delivered_total", [("app", app)]).increment(by: Int64(count))
    }

    func failed(_ reason: String, app: String, count: Int) {
        counter("push_send_failed_total", [("app", app), ("reason", reason)]).increment(by: Int64(count))
    }

    /// Days until `app`'s certificate in `environment` expires.
    func credentialExpiry(app: String, environment: String, days: Double) {
        let key = "\(app)|\(environment)"
        let gauge = expiryGauges.withLock { gauges in
            if let gauge = gauges[key] { return gauge }
            let gauge = Gauge(label: "push_credential_expiry_days", dimensions: [("app", app), ("environment", environment)])
            gauges[key] = gauge
            return gauge
        }
        gauge.record(days)
    }

    func retried(_ reason: String, count: Int) {
        counter("push_send_retries_total", "reason", reason).increment(by: Int64(count))
    }

    func deferred(_ reason: String, count: Int) {
        counter("push_send_deferred_total", "reason", reason).increment(by: Int64(count))
    }

    func rateLimited(_ action: String, count: Int) {
        counter("push_send_rate_limited_total", "action", action).increment(by: Int64(count))
    }

    func batch(_ outcome: String) {
        counter("push_send_batches_total", "outcome", outcome).increment()
    }

    func credentialFailure(app: String) {
        counter("push_send_credential_failures_total", "app", app).increment()
    }

    func setPaused(app: String, _ paused: Bool) {
        let gauge = pausedGauges.withLock { gauges in
            if let gauge = gauges[app] { return gauge }
            let gauge = Gauge(label: "push_send_app_paused", dimensions: [("app", app)])
            gauges[app] = gauge
            return gauge
        }
        gauge.record(paused ? 1 : 0)
    }

    /// Apps whose paused gauge was ever set.
    var appsWithPauseGauge: [String] { pausedGauges.withLock { Array($0.keys) } }

    func inFlight(_ delta: Int) {
        let value = inFlightCount.add(delta, ordering: .relaxed).newValue
        inFlightGauge.record(value)
    }
}
