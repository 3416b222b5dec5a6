import Foundation
import HTTPTypes
public import Hummingbird
import HummingbirdCore
public import Logging
import Mustache
import NIOCore
public import PushCore
public import PushServiceKit

/// push-console's HTTP application.
public typealias ConsoleApplication = Application<RouterResponder<ConsoleRequestContext>>

/// The request context: who is asking, once ``ConsoleAuthentication`` found out.
public struct ConsoleRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer of the connection.
    public let remoteAddress: SocketAddress?
    /// The client: the peer, or what a trusted proxy forwarded (``ConsoleClientAddress``); for the
    /// login budget and the audit log.
    public var clientAddress: String
    /// The operator (a login) or API key name.
    public var operatorName: String?
    /// What that operator or key may do.
    public var permissions: ConsolePermissions?
    /// The login session, when the request came with its cookie (not for bearer keys).
    public var session: ConsoleSessions.Session?

    public init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        remoteAddress = source.channel.remoteAddress
        clientAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }

    /// A path parameter percent-decoded (a request id may hold `/`, spaces or any letter); empty when
    /// absent or not decodable.
    func pathParameter(_ name: String) -> String {
        parameters.get(name).flatMap { $0.removingPercentEncoding } ?? ""
    }
}

/// Builds push-console's listener on `PUSH_HTTP_HOST`:`PUSH_HTTP_PORT` (default 8090); `main` and the
/// tests call this same function. The pages, the JSON API (`/api/v1/…`), `/healthz`, `/readyz` and
/// `/metrics`; everything but the login page, the static files and the health routes needs a login
/// (a session cookie) or an API key (`Authorization: Bearer`).
public func buildConsoleApplication(
    configuration: PushConfiguration, console: ConsoleConfiguration, credentials: OperatorCredentials, backend: ConsoleBackend,
    sessions: ConsoleSessions, readiness: [ReadinessCheck] = [], logger: Logger,
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) throws -> ConsoleApplication {
    let pages = try ConsolePages(backend: backend, credentials: credentials, sessions: sessions, console: console)
    let router = Router(context: ConsoleRequestContext.self)
    router.add(middleware: ConsoleHeaders())
    router.add(middleware: ConsoleClientAddress(trustedProxies: console.trustedProxies))
    AdminRoutes(readiness: readiness).add(to: router)
    router.get("/static/console.css") { _, _ in ConsolePages.asset(ConsoleTemplates.css, type: "text/css; charset=utf-8") }
    router.get("/static/console.js") { _, _ in ConsolePages.asset(ConsoleTemplates.javascript, type: "text/javascript; charset=utf-8") }
    router.get("/login") { request, _ in pages.loginPage(request) }
    router.post("/login") { request, context in await pages.login(request, context: context) }

    let authenticated = router.group().add(middleware: ConsoleAuthentication(credentials: credentials, sessions: sessions))
    authenticated.get("/") { _, context in ConsolePages.redirect(ConsolePages.home(context.permissions)) }
    authenticated.post("/logout") { request, context in await pages.logout(request, context: context) }
    authenticated.get("/compose") { _, context in pages.composePage(context: context) }
    authenticated.post("/compose") { request, context in await pages.compose(request, context: context) }
    authenticated.get("/requests") { _, context in await pages.requestsPage(context: context) }
    authenticated.get("/requests/{app}/{id}") { _, context in await pages.requestPage(context: context) }
    authenticated.get("/dead") { request, context in await pages.deadPage(request, context: context) }
    authenticated.post("/dead/replay") { request, context in await pages.replay(request, context: context) }
    authenticated.get("/status") { _, context in await pages.statusPage(context: context) }
    authenticated.get("/tokens") { request, context in await pages.tokensPage(request, context: context) }
    authenticated.post("/tokens/delete") { request, context in await pages.deleteToken(request, context: context) }

    let api = ConsoleAPI(backend: backend)
    authenticated.get("/api/v1/requests") { request, context in await api.requests(request, context: context) }
    authenticated.post("/api/v1/requests") { request, context in await api.send(request, context: context) }
    authenticated.get("/api/v1/requests/{app}/{id}") { _, context in await api.report(context: context) }
    authenticated.post("/api/v1/preview") { request, context in await api.preview(request, context: context) }
    authenticated.get("/api/v1/dead") { request, context in await api.dead(request, context: context) }
    authenticated.post("/api/v1/dead/{key}/replay") { request, context in await api.replay(request, context: context) }
    authenticated.get("/api/v1/status") { _, context in await api.status(context: context) }
    authenticated.get("/api/v1/apps/{app}/tokens/{token}") { _, context in await api.device(context: context) }
    authenticated.delete("/api/v1/apps/{app}/tokens/{token}") { _, context in await api.deleteDevice(context: context) }

    return Application(
        router: router,
        // Head and body within PUSH_CONSOLE_REQUEST_TIMEOUT_S of the first byte.
        server: RequestHeadDeadline.http1(
            configuration: HTTP1Channel.Configuration(idleTimeout: .seconds(60)), timeout: console.requestTimeout, includingBody: true),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.httpHost, port: configuration.httpPort), serverName: nil,
            availableConnectionsDelegate: MaximumAvailableConnections(console.maxConnections, logger: logger)),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.httpPort) },
        logger: logger
    )
}

/// Sets the context's client address: the peer, or what a trusted proxy forwarded in `X-Forwarded-For`.
struct ConsoleClientAddress: RouterMiddleware {
    typealias Context = ConsoleRequestContext
    let trustedProxies: TrustedProxies

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !trustedProxies.isEmpty else { return try await next(request, context) }
        var context = context
        context.clientAddress = trustedProxies.clientAddress(
            peer: context.remoteAddress?.ipAddress ?? "unknown", forwardedFor: request.headers[values: HTTPField.Name("X-Forwarded-For")!])
        return try await next(request, context)
    }
}

/// Headers on every answer: no caching, no framing, no sniffing, scripts and styles from the console
/// only, no referrer leaving it.
struct ConsoleHeaders: RouterMiddleware {
    typealias Context = ConsoleRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.cacheControl] = "no-store"
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        response.headers[.contentSecurityPolicy] = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        return response
    }
}

/// Lets a request through with its operator named in the context, or answers for it: a page without a
/// login goes to `/login` (303); the API answers `401`. A POST from a login session must carry the
/// session's CSRF token (the form's `csrf` field, checked by the page; `X-CSRF-Token` for the API).
/// A session is refused once its operator is no longer in the operators file, or after
/// ``ConsoleSessions/maximumLifetime`` however much it is used, or when its value in Redis is not one
/// the console signed. Refusals are written to the audit log.
struct ConsoleAuthentication: RouterMiddleware {
    typealias Context = ConsoleRequestContext
    let credentials: OperatorCredentials
    let sessions: ConsoleSessions

    static let cookieName = "push_console_session"

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        // By segment, as the router matches: `//api/…` is the API too.
        let isAPI = request.uri.path.split(separator: "/").first == "api"
        if let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer ") {
            guard let key = credentials.apiKey(String(authorization.dropFirst(7))) else {
                context.audit("refused", operatorName: "-", ["push.reason": "bad_key"])
                return ConsoleAPI.failure(ConsoleError(status: 401, code: "unauthorized", "the bearer key is not one of the console's API keys"))
            }
            context.operatorName = key.name
            context.permissions = key.permissions
            return try await next(request, context)
        }
        if let cookie = Self.cookie(request) {
            let found: ConsoleSessions.Session?
            do {
                found = try await sessions.find(cookie)
            } catch .forged {
                context.audit("refused", operatorName: "-", ["push.reason": "forged_session"])
                found = nil
            } catch .redis(let error) {
                let failure = ConsoleError.unavailable("Redis", error, logger: context.logger)
                return isAPI
                    ? ConsoleAPI.failure(failure)
                    : ConsolePages.plain(.serviceUnavailable, "The console cannot read its sessions (Redis is unavailable). Try again shortly.")
            }
            if let session = found, let permissions = credentials.permissions(of: session.operatorName),
                credentials.operators.contains(where: { $0.name == session.operatorName })
            {
                context.operatorName = session.operatorName
                context.permissions = permissions
                context.session = session
                let changes = request.method != .get && request.method != .head
                let token = request.headers[HTTPField.Name("X-CSRF-Token")!] ?? ""
                if isAPI, changes, !PasswordHash.constantTimeEqual(Array(token.utf8), Array(session.csrf.utf8)) {
                    context.audit("refused", ["push.reason": "csrf", "push.path": "\(request.uri.path)"])
                    return ConsoleAPI.failure(
                        ConsoleError(status: 403, code: "forbidden", "a session's API calls that change things need X-CSRF-Token"))
                }
                return try await next(request, context)
            }
        }
        if isAPI { return ConsoleAPI.failure(ConsoleError(status: 401, code: "unauthorized", "log in or send Authorization: Bearer <API key>")) }
        return ConsolePages.redirect("/login")
    }

    /// The session cookie's value, if the request has one.
    static func cookie(_ request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for part in header.split(separator: ";") {
                let pair = part.trimmingCharacters(in: .whitespaces)
                if pair.hasPrefix(cookieName + "=") { return String(pair.dropFirst(cookieName.count + 1)) }
            }
        }
        return nil
    }
}

/// An `application/x-www-form-urlencoded` body or query as fields (the last of repeated names wins).
enum FormFields {
    static func parse(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]), !name.isEmpty else { continue }
            fields[name] = parts.count > 1 ? (decode(parts[1]) ?? "") : ""
        }
        return fields
    }

    private static func decode(_ text: Substring) -> String? {
        String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    /// The body of `request` as form fields, at most `limit` bytes.
    static func body(_ request: Request, limit: Int = 256 * 1024) async throws -> [String: String] {
        var request = request
        let buffer = try await request.collectBody(upTo: limit)
        return parse(String(buffer: buffer))
    }
}
