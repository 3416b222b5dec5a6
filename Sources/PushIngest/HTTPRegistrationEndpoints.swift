import Foundation
import Hummingbird
import Logging
import PushCore
import RateLimiting
import Redis
import TokenRegistry

/// What every registration endpoint shares: the apps, the registry, the rate limits and the bounds of
/// one request. The handlers are in `HTTPRegistrationEndpoints+API.swift` (`/v1/apps/…`) and
/// `HTTPRegistrationEndpoints+Legacy.swift` (`/register`, `/push_token`).
///
/// Every handler answers through ``respond(_:context:legacy:_:)``, which turns an ``IngestError`` into
/// its answer, logs failures and records the metrics, so the handlers themselves only say what went
/// right or wrong. The request timeout is enforced under the handlers, per connection, by
/// ``HTTPRequestTimeoutHandler``.
struct HTTPRegistrationEndpoints: Sendable {
    let apps: AppsFile
    let registry: TokenRegistry
    let rateLimiter: RateLimiter
    let configuration: IngestConfiguration
    let logger: Logger
    let metrics: IngestMetrics
    private let failureLog = LogThrottle(interval: .seconds(1))
    /// Each app's API keys, digested once at start.
    private let bearerKeys: [String: BearerKeys]
    /// Each app's rate-limit key, `<prefix>:{<bundle id>}:ingest` (the hash tag keeps it in the app's
    /// Redis Cluster slot).
    private let appLimitKeys: [String: String]

    init(
        apps: AppsFile, registry: TokenRegistry, rateLimiter: RateLimiter, configuration: IngestConfiguration, metrics: IngestMetrics, logger: Logger
    ) {
        self.apps = apps
        self.registry = registry
        self.rateLimiter = rateLimiter
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        var bearerKeys: [String: BearerKeys] = [:]
        for (bundleID, app) in apps.apps {
            bearerKeys[bundleID] = BearerKeys(app.ingest.apiKeys)
        }
        self.bearerKeys = bearerKeys
        self.appLimitKeys = Dictionary(uniqueKeysWithValues: apps.apps.keys.map { ($0, "\(configuration.rateLimitKeyPrefix):{\($0)}:ingest") })
    }

    /// A successful answer: a status and an optional JSON body.
    struct Answer: Sendable {
        var status: HTTPResponse.Status
        var body: [UInt8]?
        /// The `outcome` metric label (`created`, `updated`, `found`, `deleted`, `absent`).
        var outcome: String
    }

    // MARK: Answering

    /// Runs `handler` and answers with its result or its error: the API's
    /// `{"error","message"}` or, with `legacy`, `{"ret","msg"}` (success: `{"ret":0,"msg":"ok"}`).
    func respond(
        _ endpoint: IngestMetrics.Endpoint,
        context: IngestRequestContext,
        legacy: Bool = false,
        _ handler: () async throws(IngestError) -> Answer
    ) async -> Response {
        let start = ContinuousClock.now
        let result: Result<Answer, IngestError>
        do throws(IngestError) {
            result = .success(try await handler())
        } catch {
            result = .failure(error)
        }
        let response: Response
        switch result {
        case .success(let answer):
            metrics.record(endpoint, outcome: answer.outcome, duration: ContinuousClock.now - start)
            if legacy {
                response = Self.json(.ok, Self.legacySuccess)
            } else {
                response = answer.body.map { Self.json(answer.status, $0) } ?? Response(status: answer.status)
            }
        case .failure(let error):
            metrics.record(endpoint, outcome: error.code.description, duration: ContinuousClock.now - start)
            log(error, endpoint: endpoint, context: context)
            response = Self.response(for: error, legacy: legacy)
        }
        return response
    }

    /// `{"ret":0,"msg":"ok"}`
    private static let legacySuccess = Array(#"{"ret":0,"msg":"ok"}"#.utf8)

    /// The answer to a refused request (also used by the router's error middleware).
    static func response(for error: IngestError, legacy: Bool) -> Response {
        var response = json(HTTPResponse.Status(code: error.status), Array((legacy ? error.legacyJSONBody : error.jsonBody).utf8))
        if let seconds = error.retryAfterSeconds {
            response.headers[.retryAfter] = String(seconds)
        }
        if error.code == .unauthorized {
            response.headers[.wwwAuthenticate] = "Bearer"
        }
        return response
    }

    static func json(_ status: HTTPResponse.Status, _ body: [UInt8]) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body))
        )
    }

    /// Server-side failures are warnings with the cause, at most one a second (a Redis outage under load
    /// would otherwise log every request), saying how many were left out; refusals of bad input are
    /// debug lines only, so a misbehaving client cannot flood the log.
    private func log(_ error: IngestError, endpoint: IngestMetrics.Endpoint, context: IngestRequestContext) {
        var metadata: Logger.Metadata = [
            "push.endpoint": "\(endpoint.rawValue)",
            "push.error": "\(error.code)",
            "push.client": "\(context.clientAddress)",
        ]
        if error.status >= 500 {
            guard let suppressed = failureLog.admit(now: ContinuousClock.now) else { return }
            if suppressed > 0 { metadata["push.suppressed"] = "\(suppressed)" }
            if let cause = error.cause { metadata["push.cause"] = "\(cause)" }
            logger.warning("Registration request failed: \(error.message)", metadata: metadata)
        } else {
            logger.debug("Registration request refused: \(error.message)", metadata: metadata)
        }
    }

    // MARK: Shared steps

    /// The app `bundleID` names, once `Authorization: Bearer <key>` is one of its `ingest.api_keys`
    /// (compared in constant time). The key is checked first, so nobody without a key learns which
    /// bundle ids exist:
    ///
    /// - no header, another scheme, an empty key, or a key that is no app's: `401` (with
    ///   `WWW-Authenticate: Bearer`), whatever the path names;
    /// - a key of some app, for another app or for a bundle id that is not configured: `403`, the
    ///   same answer either way.
    func authenticatedApp(_ request: Request, bundleID: String) throws(IngestError) -> AppConfiguration {
        guard let header = request.headers[.authorization] else {
            throw IngestError(.unauthorized, field: "Authorization", "is required: Bearer <the app's ingest API key>")
        }
        guard let key = Self.bearerCredential(header) else {
            throw IngestError(.unauthorized, field: "Authorization", "must be Bearer <the app's ingest API key>")
        }
        // Every app's keys are compared (not just the path's), so the time does not depend on the path.
        var accepted = false
        var anyApp = false
        for (app, keys) in bearerKeys {
            let accepts = keys.accepts(key)
            anyApp = anyApp || accepts
            if app == bundleID { accepted = accepts }
        }
        guard anyApp else {
            throw IngestError(.unauthorized, field: "Authorization", "the key is not an ingest API key of this service")
        }
        guard accepted, let app = apps.app(bundleID: bundleID) else {
            throw IngestError(.forbidden, field: "Authorization", "the key is not valid for app \(LegacyRegistrationForm.quoted(bundleID))")
        }
        return app
    }

    /// The credential of `Bearer <credential>` (scheme in any case, spaces around it ignored), or nil for
    /// another scheme or an empty credential. Byte-level: this runs on every API request.
    static func bearerCredential(_ header: String) -> Substring? {
        let trimmed = trimmingSpaces(Substring(header))
        guard trimmed.utf8.count > 7 else { return nil }
        let scheme = trimmed.utf8.prefix(7)
        guard scheme.elementsEqual("bearer ".utf8, by: { $0 | 0x20 == $1 }) else { return nil }
        let credential = trimmingSpaces(trimmed.dropFirst(7))
        return credential.isEmpty ? nil : credential
    }

    /// `text` without leading and trailing spaces and tabs.
    static func trimmingSpaces(_ text: Substring) -> Substring {
        let isSpace = { (character: Character) in character == " " || character == "\t" }
        guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) }) else {
            return text[text.endIndex...]
        }
        return text[first...last]
    }

    /// Spends one request of the client's allowance and one of the app's; both checks go to Redis in
    /// one pipeline (one round trip), each key decided on its own.
    ///
    /// - Throws: ``IngestError/Code/rateLimited`` with the longer `Retry-After` of the two, or
    ///   ``IngestError/Code/unavailable`` when Redis does not answer (the registry would not either).
    func enforceRateLimits(client: String, app: String) async throws(IngestError) {
        var limits: [RateLimit] = []
        var scopes: [String] = []
        if configuration.ratePerClient > 0 {
            limits.append(RateLimit(key: clientLimitKey(client), limit: configuration.ratePerClient, period: .seconds(1)))
            scopes.append("client address")
        }
        if configuration.ratePerApp > 0, let key = appLimitKeys[app] {
            limits.append(RateLimit(key: key, limit: configuration.ratePerApp, period: .seconds(1)))
            scopes.append("app")
        }
        guard !limits.isEmpty else { return }
        let decisions: [RateLimitDecision]
        do {
            decisions = try await rateLimiter.check(limits)
        } catch {
            throw IngestError.rateLimiter(error)
        }
        var retryAfter: Duration?
        var scope = ""
        for (decision, name) in zip(decisions, scopes) {
            if case .limited(let wait) = decision, wait > (retryAfter ?? .zero) {
                retryAfter = wait
                scope = name
            }
        }
        if let retryAfter {
            throw IngestError(.rateLimited, "too many requests for this \(scope); retry after the Retry-After seconds", retryAfter: retryAfter)
        }
    }

    /// A token the registry does not hold yet is charged to the app's budget of new tokens a minute
    /// and to the client address's: a flood of made-up tokens with the app's key (which ships inside
    /// the app) is refused with `429` long before Redis is full, while updates of known tokens never
    /// count. Two concurrent first registrations of one token may both be charged.
    func enforceNewTokenBudgets(app: AppConfiguration, token: DeviceToken, client: String) async throws(IngestError) {
        var limits: [RateLimit] = []
        var scopes: [String] = []
        if app.ingest.newTokensPerMinute > 0 {
            limits.append(
                RateLimit(
                    key: "\(configuration.rateLimitKeyPrefix):{\(app.bundleID)}:ingest:new-tokens", limit: app.ingest.newTokensPerMinute,
                    period: .seconds(60)))
            scopes.append("this app (ingest.new_tokens_per_minute)")
        }
        if configuration.newTokensPerClientPerMinute > 0 {
            limits.append(
                RateLimit(
                    key: "\(configuration.rateLimitKeyPrefix):ingest:new-tokens:client:\(client)", limit: configuration.newTokensPerClientPerMinute,
                    period: .seconds(60)))
            scopes.append("this client address (PUSH_INGEST_NEW_TOKENS_PER_CLIENT_PER_MINUTE)")
        }
        guard !limits.isEmpty else { return }
        let decisions: [RateLimitDecision]
        do {
            guard try await !registry.isRegistered(app: app.bundleID, token: token) else { return }
            decisions = try await rateLimiter.check(limits)
        } catch let error as RegistryError {
            throw IngestError.registry(error)
        } catch {
            throw IngestError.rateLimiter(error)
        }
        for (decision, scope) in zip(decisions, scopes) {
            if case .limited(let wait) = decision {
                throw IngestError(
                    .rateLimited, field: "token", "too many new devices a minute for \(scope); retry after the Retry-After seconds",
                    retryAfter: wait)
            }
        }
    }

    /// `<prefix>:ingest:client:<address>`
    private func clientLimitKey(_ client: String) -> String {
        "\(configuration.rateLimitKeyPrefix):ingest:client:\(client)"
    }

    /// Charges a refused request to the client's allowance, so a flood of bad or unauthenticated
    /// requests is throttled too: the answer becomes `429` once the allowance is spent (and stays
    /// `error` while Redis is unreachable: a refusal needs no registry).
    func refusal(_ error: IngestError, client: String) async -> IngestError {
        if case .success(.limited(let wait)?) = await decide(key: clientLimitKey(client), limit: configuration.ratePerClient) {
            return IngestError(.rateLimited, "too many requests for this client address; retry after the Retry-After seconds", retryAfter: wait)
        }
        return error
    }

    /// One GCRA check of `limit` requests per second with a one-second burst; nil when the limit is off.
    private func decide(key: String?, limit: Int) async -> Result<RateLimitDecision?, RedisError> {
        guard let key, limit > 0 else { return .success(nil) }
        do {
            return .success(try await rateLimiter.check(key: key, limit: limit, period: .seconds(1)))
        } catch {
            return .failure(error)
        }
    }

    /// Reads the body, refusing more than ``IngestConfiguration/maxBodySize`` bytes (`413`) — from the
    /// `Content-Length` before reading anything when the client sends one.
    func collectBody(_ request: Request) async throws(IngestError) -> [UInt8] {
        let limit = configuration.maxBodySize
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw IngestError(.bodyTooLarge, field: "body", "is \(length) bytes, more than the \(limit) allowed")
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return Array(buffer.readableBytesView)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw IngestError(.bodyTooLarge, field: "body", "is more than the \(limit) bytes allowed")
        } catch {
            // The connection closed mid-body: the client went away, or the request timed out and
            // HTTPRequestTimeoutHandler has already answered.
            throw IngestError(.invalidRequest(.missingField), field: "body", "the connection ended before the whole body arrived")
        }
    }

    /// Whether `Content-Type` is `expected` (lowercase), in any case and with any parameters
    /// (`application/json; charset=utf-8`). Byte-level: this runs on every `PUT`.
    static func hasMediaType(_ request: Request, _ expected: String) -> Bool {
        guard let value = request.headers[.contentType] else { return false }
        let type = trimmingSpaces(value.prefix { $0 != ";" })
        return type.utf8.elementsEqual(expected.utf8) { $0 | ($0 >= 0x41 && $0 <= 0x5A ? 0x20 : 0) == $1 }
    }

    /// The media type of `Content-Type` without parameters, lowercased (`application/json`), for messages.
    static func mediaType(_ request: Request) -> String? {
        request.headers[.contentType].map { value in
            trimmingSpaces(value.prefix { $0 != ";" }).lowercased()
        }
    }

    /// Whether the request announces a body (a non-zero `Content-Length` or chunked transfer).
    static func hasBody(_ request: Request) -> Bool {
        if let length = request.headers[.contentLength] {
            return trimmingSpaces(Substring(length)) != "0"
        }
        return request.headers[.transferEncoding] != nil
    }

    /// Stores `registration` as `token`'s record for `app`, answering 503 when Redis is unavailable.
    func upsert(
        app: AppConfiguration, token: DeviceToken, registration: DeviceRegistration, client: String,
        claim: (name: String, lifetime: Duration)? = nil
    ) async throws(IngestError) -> (created: Bool, record: DeviceRecord) {
        try await enforceNewTokenBudgets(app: app, token: token, client: client)
        let stored: TokenRegistry.Upserted
        do {
            stored = try await registry.upsert(
                app: app.bundleID,
                token: token,
                registration: registration,
                defaultEnvironment: app.environment,
                now: Self.nowMilliseconds(),
                claim: claim
            )
        } catch {
            throw IngestError.registry(error)
        }
        if stored.claimedBefore {
            throw IngestError(.badCredential, field: "credential", "was already used: each signed registration is accepted once")
        }
        guard stored.applied else {
            // Only when another instance's clock (or a queue message's registered_at) is ahead of ours.
            throw IngestError(.conflict, field: "token", "a newer registration or deletion of this token is already stored")
        }
        return (stored.created, stored.record)
    }

    /// Wall-clock ms since 1970: `registered_at`/`updated_at` and the legacy timestamp window.
    static func nowMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded())
    }
}
