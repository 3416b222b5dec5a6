public import Hummingbird
import HummingbirdCore
public import Logging
public import PushCore
public import PushServiceKit
public import RateLimiting
public import TokenRegistry

/// push-ingest's HTTP application.
public typealias IngestApplication = Application<RouterResponder<IngestRequestContext>>

/// Builds push-ingest's HTTP listener on ``PushServiceKit/PushConfiguration/httpHost``:``PushServiceKit/PushConfiguration/httpPort``
/// (`PUSH_HTTP_PORT`, default 8080); `main` and the tests call this same function.
///
/// Routes:
/// - `PUT`, `GET`, `DELETE /v1/apps/{app}/devices/{token}`: the registration API (see
///   `HTTPRegistrationEndpoints+API.swift` for the status codes);
/// - `GET`/`POST /register` and `POST /push_token`: the legacy forms (`{"ret","msg"}` answers, see
///   `HTTPRegistrationEndpoints+Legacy.swift`);
/// - `GET /openapi.yaml`: this API as an OpenAPI 3.1 document (``OpenAPISpec``, the repository's
///   `openapi.yaml`), `application/yaml`;
/// - `GET /healthz`, `/readyz`, `/metrics`: ``PushServiceKit/AdminRoutes`` on the same port, unless
///   `PUSH_ADMIN_PORT` gives them a listener of their own;
/// - a path above with another method: `405 {"error":"method_not_allowed"}` with `Allow`;
/// - anything else: `404 {"error":"not_found"}`.
///
/// Bounds on every request: headers (``IngestConfiguration/maxHeaderFieldSize`` and friends; over them
/// the parser answers `400` and closes the connection), the body (``IngestConfiguration/maxBodySize``,
/// `413`), the time (``IngestConfiguration/requestTimeout``, `503 timeout`), idle keep-alive connections
/// (``IngestConfiguration/idleTimeout``), open connections (``IngestConfiguration/maxConnections``; more wait in
/// the accept backlog) and the client and app rate limits (`429`).
///
/// - Parameters:
///   - configuration: Where to listen; port 0 picks a free port (tests).
///   - ingest: Rate limits and request bounds.
///   - apps: The apps file: bundle ids, API keys, legacy credentials.
///   - registry: Where registrations go.
///   - rateLimiter: The shared GCRA limiter (Redis).
///   - readiness: The checks `GET /readyz` runs (the runtime's AMQP and Redis checks).
///   - logger: The server's logger.
///   - onServerRunning: Called with the bound port once the listener accepts connections.
public func buildIngestApplication(
    configuration: PushConfiguration,
    ingest: IngestConfiguration = IngestConfiguration(),
    apps: AppsFile,
    registry: TokenRegistry,
    rateLimiter: RateLimiter,
    readiness: [ReadinessCheck] = [],
    logger: Logger,
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) -> IngestApplication {
    let metrics = IngestMetrics()
    let endpoints = HTTPRegistrationEndpoints(
        apps: apps,
        registry: registry,
        rateLimiter: rateLimiter,
        configuration: ingest,
        metrics: metrics,
        logger: logger
    )
    typealias Handler = @Sendable (Request, IngestRequestContext) async throws -> Response
    var api: [(route: RouteTable.Route, handler: Handler)] = []
    // Each route once: the router serves it and the 405 table lists it.
    func serve(_ method: HTTPRequest.Method, _ path: String, _ handler: @escaping Handler) {
        api.append((RouteTable.Route(method, path), handler))
    }

    serve(.put, "/v1/apps/{app}/devices/{token}", { request, context in await endpoints.put(request, context: context) })
    serve(.get, "/v1/apps/{app}/devices/{token}", { request, context in await endpoints.get(request, context: context) })
    serve(.delete, "/v1/apps/{app}/devices/{token}", { request, context in await endpoints.delete(request, context: context) })
    for (kind, parameter) in [("push-to-start", "attributes_type"), ("activities", "activity_id")] {
        let path = "/v1/apps/{app}/devices/{token}/\(kind)/{\(parameter)}"
        serve(.put, path, { request, context in await endpoints.putActivityToken(request, context: context) })
        serve(.get, path, { request, context in await endpoints.getActivityToken(request, context: context) })
        serve(.delete, path, { request, context in await endpoints.deleteActivityToken(request, context: context) })
    }
    serve(.get, "/register", { request, context in await endpoints.register(request, context: context) })
    serve(.post, "/register", { request, context in await endpoints.register(request, context: context) })
    serve(.post, "/push_token", { request, context in await endpoints.pushToken(request, context: context) })
    // The API's own description, on the public port whatever PUSH_ADMIN_PORT says.
    serve(.get, "/openapi.yaml", { _, _ in OpenAPISpec.response() })
    // Without PUSH_ADMIN_PORT the admin routes share the API's port (one port to expose).
    let sharesAdminRoutes = configuration.adminPort == nil
    var table = RouteTable(api.map(\.route))
    if sharesAdminRoutes {
        for path in AdminRoutes.paths { table.add(.get, path) }
    }

    let router = Router(context: IngestRequestContext.self)
    router.add(middleware: HTTPErrorMiddleware(routes: table))
    if !ingest.trustedProxies.isEmpty {
        router.add(middleware: TrustedProxyMiddleware(trustedProxies: ingest.trustedProxies))
    }
    for (route, handler) in api {
        router.on(RouterPath(route.template), method: route.method, use: handler)
    }
    if sharesAdminRoutes {
        AdminRoutes(readiness: readiness).add(to: router)
    }

    let http1 = HTTP1Channel.Configuration(
        additionalChannelHandlers: [HTTPRequestTimeoutHandler(timeout: ingest.requestTimeout, timeouts: metrics.timeouts)],
        idleTimeout: HTTPRequestTimeoutHandler.timeAmount(ingest.idleTimeout),
        httpDecoderConfiguration: .init(
            maxHeaderFieldSize: ingest.maxHeaderFieldSize,
            maxHeaderListSize: ingest.maxHeaderListSize,
            maxHeaderFieldCount: ingest.maxHeaderFieldCount
        )
    )
    return Application(
        router: router,
        server: RequestHeadDeadline.http1(configuration: http1, timeout: ingest.headerTimeout),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.httpHost, port: configuration.httpPort),
            serverName: nil,
            backlog: 1024,
            availableConnectionsDelegate: MaximumAvailableConnections(ingest.maxConnections, logger: logger)
        ),
        onServerRunning: { channel in
            await onServerRunning(channel.localAddress?.port ?? configuration.httpPort)
        },
        logger: logger
    )
}

/// Answers what no endpoint handled in the API's JSON shape: Hummingbird's `404` for an unknown path
/// becomes `{"error":"not_found",…}`, a known path asked with another method `405` with `Allow`, and
/// an unexpected error `500 {"error":"internal"}` (logged), never an empty body.
struct HTTPErrorMiddleware: RouterMiddleware {
    typealias Context = IngestRequestContext

    /// Every route the router serves, for `405`'s `Allow`.
    let routes: RouteTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            if error.status == .notFound {
                let allowed = routes.methods(forPath: request.uri.path)
                if !allowed.isEmpty {
                    let allow = allowed.map(\.rawValue).joined(separator: ", ")
                    var response = HTTPRegistrationEndpoints.response(
                        for: IngestError(.methodNotAllowed, "\(request.method) is not served on \(request.uri.path); allowed: \(allow)"),
                        legacy: false)
                    response.headers[.allow] = allow
                    return response
                }
            }
            let ingestError: IngestError =
                switch error.status {
                case .notFound: IngestError(.notFound, "no route for \(request.method) \(request.uri.path)")
                case .contentTooLarge: IngestError(.bodyTooLarge, field: "body", "is too large")
                default:
                    IngestError(.invalidRequest(.invalidField), "\(error.status.code) \(error.status.reasonPhrase)")
                }
            var response = HTTPRegistrationEndpoints.response(for: ingestError, legacy: false)
            response.status = error.status
            return response
        } catch {
            context.logger.error("Unexpected error answering a request", metadata: ["push.error": "\(error)"])
            return HTTPRegistrationEndpoints.response(for: IngestError(.internal, "internal error; it has been logged"), legacy: false)
        }
    }
}

extension OpenAPISpec {
    /// The document's bytes, made once.
    private static let body = ByteBuffer(string: yaml)

    /// `200` with the document as `application/yaml`.
    static func response() -> Response {
        Response(status: .ok, headers: [.contentType: "application/yaml"], body: ResponseBody(byteBuffer: body))
    }
}
