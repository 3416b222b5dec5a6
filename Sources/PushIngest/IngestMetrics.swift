import Metrics
import Synchronization

/// push-ingest's HTTP metrics (swift-metrics; Prometheus on `/metrics` through the service kit):
///
/// - `push_ingest_requests_total{endpoint, outcome}`: every request by what came of it.
///   `endpoint` is `put`, `get`, `delete`, `register` or `push_token`; `outcome` is `created` or
///   `updated` (registrations), `found`, `deleted`, `absent` (a delete of an unknown token), or the
///   `error` code of ``IngestError`` (`invalid_token`, `forbidden`, `rate_limited`, `unavailable`, …).
///   Registrations per second are `rate(push_ingest_requests_total{outcome=~"created|updated"}[1m])`.
/// - `push_ingest_request_duration_seconds{endpoint}`: a histogram of the time from the handler's
///   start to its answer (rate limits, body, Redis; not the network).
/// - `push_ingest_request_timeouts_total`: requests answered `503 timeout` by
///   ``HTTPRequestTimeoutHandler`` (their handler's late outcome is still counted above).
///
/// Handles are created once per label set and kept, so the request path does no factory lookup.
final class IngestMetrics: Sendable {
    enum Endpoint: String, Sendable, CaseIterable {
        case put
        case get
        case delete
        case register
        case pushToken = "push_token"
        case activityPut = "activity_put"
        case activityGet = "activity_get"
        case activityDelete = "activity_delete"
    }

    private struct Key: Hashable {
        let endpoint: Endpoint
        let outcome: String
    }

    private let counters = Mutex<[Key: Counter]>([:])
    private let timers: [Endpoint: Timer]
    /// Requests cut off by the request timeout.
    let timeouts = Counter(label: "push_ingest_request_timeouts_total")

    init() {
        var timers: [Endpoint: Timer] = [:]
        for endpoint in Endpoint.allCases {
            timers[endpoint] = Timer(label: "push_ingest_request_duration_seconds", dimensions: [("endpoint", endpoint.rawValue)])
        }
        self.timers = timers
    }

    /// Counts one answer and records its duration.
    func record(_ endpoint: Endpoint, outcome: String, duration: Duration) {
        let key = Key(endpoint: endpoint, outcome: outcome)
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: "push_ingest_requests_total", dimensions: [("endpoint", endpoint.rawValue), ("outcome", outcome)])
            counters[key] = counter
            return counter
        }
        counter.increment()
        timers[endpoint]?.record(duration: duration)
    }
}
