import Hummingbird
import Metrics
import Prometheus

/// `GET /healthz`, `GET /readyz` and `GET /metrics`, for ``AdminServer`` or for a service's own router
/// (push-ingest serves them next to its API on the same port).
///
/// - `/healthz` → `200 {"status":"ok"}` while the process serves HTTP.
/// - `/readyz` → `200 {"status":"ready","checks":{"amqp":"ok"}}` when every ``ReadinessCheck`` is ready,
///   else `503 {"status":"not_ready","checks":{"amqp":"connection refused …","redis":"ok"}}`. Checks run
///   concurrently; each failed answer increments `push_readiness_failures_total{check="<name>"}`.
/// - `/metrics` → the registry in Prometheus text format (`text/plain; version=0.0.4`).
public struct AdminRoutes: Sendable {
    /// The checks `/readyz` runs.
    public let readiness: [ReadinessCheck]
    /// The registry `/metrics` serves.
    public let registry: PrometheusCollectorRegistry

    public init(readiness: [ReadinessCheck] = [], registry: PrometheusCollectorRegistry = PushMetrics.registry) {
        self.readiness = readiness
        self.registry = registry
    }

    /// The three paths, each served with `GET`.
    public static let paths = [healthPath, readinessPath, metricsPath]
    static let healthPath = "/healthz"
    static let readinessPath = "/readyz"
    static let metricsPath = "/metrics"

    /// Adds the three routes to `router`.
    public func add<Methods: RouterMethods>(to router: Methods) {
        router.get(RouterPath(Self.healthPath)) { _, _ -> Response in
            Self.json(.ok, JSONText.object([("status", "ok")]))
        }
        router.get(RouterPath(Self.readinessPath)) { _, _ -> Response in
            let report = await readinessReport()
            let checks = JSONText.object(report.checks)
            let status = report.isReady ? "ready" : "not_ready"
            return Self.json(report.isReady ? .ok : .serviceUnavailable, "{\"status\":\"\(status)\",\"checks\":\(checks)}")
        }
        router.get(RouterPath(Self.metricsPath)) { _, _ -> Response in
            Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer()))
            )
        }
    }

    /// Runs every check concurrently: whether all are ready, and each check's `"ok"` or reason, in the
    /// order the checks were given.
    public func readinessReport() async -> (isReady: Bool, checks: [(String, String)]) {
        let statuses = await withTaskGroup(of: (Int, ReadinessCheck.Status).self) { group in
            for (index, check) in readiness.enumerated() {
                group.addTask { (index, await check.run()) }
            }
            var statuses = [ReadinessCheck.Status](repeating: .ready, count: readiness.count)
            for await (index, status) in group {
                statuses[index] = status
            }
            return statuses
        }
        var isReady = true
        var checks: [(String, String)] = []
        for (check, status) in zip(readiness, statuses) {
            switch status {
            case .ready:
                checks.append((check.name, "ok"))
            case .notReady(let reason):
                isReady = false
                checks.append((check.name, reason))
                Counter(label: "push_readiness_failures_total", dimensions: [("check", check.name)]).increment()
            }
        }
        return (isReady, checks)
    }

    private static func json(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body))
        )
    }
}
