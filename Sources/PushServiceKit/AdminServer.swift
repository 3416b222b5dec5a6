import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// The admin HTTP listener of push-render, push-send and push-feedback: ``AdminRoutes`` on
/// `PUSH_HTTP_HOST:PUSH_HTTP_PORT`, as a `Service` of the executable's `ServiceGroup`.
///
/// On graceful shutdown it stops accepting connections and finishes the requests in flight. Build it
/// with ``buildAdminServer(configuration:readiness:registry:logger:onServerRunning:)``.
public struct AdminServer: Service, CustomStringConvertible {
    private let application: Application<RouterResponder<BasicRequestContext>>
    private let address: String

    fileprivate init(application: Application<RouterResponder<BasicRequestContext>>, address: String) {
        self.application = application
        self.address = address
    }

    public func run() async throws {
        try await application.run()
    }

    public var description: String {
        "AdminServer(\(address))"
    }
}

/// Builds the admin listener on ``PushConfiguration/httpHost``:``PushConfiguration/effectiveAdminPort`` (`PUSH_ADMIN_PORT`, else `PUSH_HTTP_PORT`).
///
/// - Parameters:
///   - configuration: Where to listen; port 0 picks a free port (tests).
///   - readiness: The checks `GET /readyz` runs.
///   - registry: What `GET /metrics` serves (default: ``PushMetrics/registry``).
///   - logger: The server's logger.
///   - onServerRunning: Called with the bound port once the listener accepts connections.
public func buildAdminServer(
    configuration: PushConfiguration,
    readiness: [ReadinessCheck] = [],
    registry: PrometheusCollectorRegistry = PushMetrics.registry,
    logger: Logger,
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) -> AdminServer {
    let router = Router(options: .autoGenerateHeadEndpoints)
    AdminRoutes(readiness: readiness, registry: registry).add(to: router)
    let application = Application(
        router: router,
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.httpHost, port: configuration.effectiveAdminPort),
            serverName: nil
        ),
        onServerRunning: { channel in
            await onServerRunning(channel.localAddress?.port ?? configuration.effectiveAdminPort)
        },
        logger: logger
    )
    return AdminServer(application: application, address: "\(configuration.httpHost):\(configuration.effectiveAdminPort)")
}
