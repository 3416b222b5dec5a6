import Metrics
import Prometheus
import Synchronization

/// The process's Prometheus registry, fed by swift-metrics and served on `GET /metrics`.
public enum PushMetrics {
    /// The one registry of the process. ``AdminServer`` serves it unless given another.
    public static let registry = PrometheusCollectorRegistry()

    private static let isBootstrapped = Mutex(false)

    /// What `GET /metrics` serves now (Prometheus text format).
    public static func exposition() -> String {
        String(decoding: registry.emitToBuffer(), as: UTF8.self)
    }

    /// Routes swift-metrics (`Counter`, `Gauge`, `Timer`, …) into ``registry`` through
    /// `PrometheusMetricsFactory`, once per process.
    ///
    /// `MetricsSystem.bootstrap` may run only once per process; later calls change nothing and return
    /// `false`. Metrics created before the first call stay no-ops, so call this at start.
    @discardableResult
    public static func bootstrap() -> Bool {
        let isFirst = isBootstrapped.withLock { isBootstrapped in
            defer { isBootstrapped = true }
            return !isBootstrapped
        }
        guard isFirst else {
            return false
        }
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return true
    }
}
