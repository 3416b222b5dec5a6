import Hummingbird
import PushCore
import RateLimiting
import TokenRegistry

/// The legacy client forms (CONTRACT.md, "Legacy client forms"), so shipped apps keep working unchanged:
///
/// - `GET /register?…` and `POST /register` (parameters in the query, or in an
///   `application/x-www-form-urlencoded` body; a name in both takes the body's value): see
///   ``LegacyRegistrationForm`` for the parameters and the credential check.
/// - `POST /push_token` with `username=…&token=…` (form body or query): see ``LegacyPushTokenForm``.
///
/// Answers are JSON: `200 {"ret":0,"msg":"ok"}`, or the HTTP status and `ret` of ``IngestError`` with
/// the reason in `msg`:
///
/// | `ret` | HTTP | meaning |
/// |---|---|---|
/// | 0 | 200 | registered |
/// | 1 | 400, 408, 413, 415 | a bad, missing or oversized parameter or body, or a body that did not arrive in time (`msg` names it) |
/// | 2 | 403 | `credential` missing or wrong |
/// | 3 | 403 | `timestamp` outside the app's window |
/// | 4 | 404 | `app_name` names no app and there is no default app |
/// | 5 | 429 (+ `Retry-After`) | rate limited |
/// | 6 | 503 (500 for a bug) | the registry is unavailable or answering timed out; try again |
extension HTTPRegistrationEndpoints {
    func register(_ request: Request, context: IngestRequestContext) async -> Response {
        await respond(.register, context: context, legacy: true) { () async throws(IngestError) -> Answer in
            let client = context.clientAddress
            let form: LegacyRegistrationForm
            let app: AppConfiguration
            do throws(IngestError) {
                let parameters = try await legacyParameters(request)
                do throws(RegistrationError) {
                    form = try LegacyRegistrationForm(parameters: parameters)
                } catch {
                    throw IngestError(error)
                }
                guard let resolved = apps.appForLegacyRegistration(appName: form.appName) else {
                    throw IngestError(.unknownApp, field: "app_name", "names no app and no app is the default")
                }
                app = resolved
                try form.verify(ingest: app.ingest, nowMilliseconds: Self.nowMilliseconds())
            } catch {
                throw await refusal(error, client: client)
            }
            try await enforceRateLimits(client: client, app: app.bundleID)
            // The credential is claimed in the same write: a refusal before it (429, 503) leaves it
            // unused, so the client's identical retry registers.
            let (created, _) = try await upsert(
                app: app, token: form.token, registration: form.registration, client: client, claim: Self.claim(form, app: app))
            return Answer(status: .ok, body: nil, outcome: created ? "created" : "updated")
        }
    }

    func pushToken(_ request: Request, context: IngestRequestContext) async -> Response {
        await respond(.pushToken, context: context, legacy: true) { () async throws(IngestError) -> Answer in
            let client = context.clientAddress
            let form: LegacyPushTokenForm
            let app: AppConfiguration
            do throws(IngestError) {
                let parameters = try await legacyParameters(request)
                do throws(RegistrationError) {
                    form = try LegacyPushTokenForm(parameters: parameters)
                } catch {
                    throw IngestError(error)
                }
                guard let defaultApp = apps.defaultApp else {
                    throw IngestError(.unknownApp, "no app is the default, and /push_token registers for the default app")
                }
                guard defaultApp.ingest.pushToken else {
                    // Not naming the app: this answer goes to anyone who asks.
                    throw IngestError(.forbidden, "/push_token is not enabled (ingest.push_token of the default app in the apps file)")
                }
                app = defaultApp
            } catch {
                throw await refusal(error, client: client)
            }
            try await enforceRateLimits(client: client, app: app.bundleID)
            try await enforcePushTokenLimit(app: app.bundleID, username: form.registration.user)
            let (created, _) = try await upsert(app: app, token: form.token, registration: form.registration, client: client)
            return Answer(status: .ok, body: nil, outcome: created ? "created" : "updated")
        }
    }

    /// `/push_token` binds a username to a token without a credential: at most
    /// ``PushCore/AppConfiguration/Ingest/pushTokenPerUserPerMinute`` registrations per username a
    /// minute, so nobody can attach a flood of tokens to someone's account.
    private func enforcePushTokenLimit(app: String, username: String?) async throws(IngestError) {
        guard let username else { return }
        let limit = RateLimit(
            key: "\(configuration.rateLimitKeyPrefix):{\(app)}:ingest:push_token:\(username)",
            limit: AppConfiguration.Ingest.pushTokenPerUserPerMinute, period: .seconds(60))
        let decisions: [RateLimitDecision]
        do {
            decisions = try await rateLimiter.check([limit])
        } catch {
            throw IngestError.rateLimiter(error)
        }
        if case .limited(let wait)? = decisions.first {
            throw IngestError(
                .rateLimited, field: "username", "too many /push_token registrations for this username; retry after the Retry-After seconds",
                retryAfter: wait)
        }
    }

    /// A checked credential is accepted once: a captured request replayed within the timestamp window
    /// is refused (`ret` 2). Remembered for twice the window, the longest it can stay valid.
    static func claim(_ form: LegacyRegistrationForm, app: AppConfiguration) -> (name: String, lifetime: Duration)? {
        guard app.ingest.credential != .none, let credential = form.credential?.lowercased() else { return nil }
        return ("credential:" + credential, app.ingest.timestampWindow * 2)
    }

    /// The query's parameters, and for a request with a body, the form body's (which win).
    ///
    /// A non-empty body in anything but `application/x-www-form-urlencoded` is `415` (ret 1): silently
    /// ignoring it would register a device with none of the parameters the client meant to send.
    private func legacyParameters(_ request: Request) async throws(IngestError) -> FormParameters {
        let query: FormParameters
        do throws(RegistrationError) {
            query = try FormParameters(urlEncoded: Array((request.uri.query ?? "").utf8))
        } catch {
            throw IngestError(error)
        }
        guard request.method == .post, Self.hasBody(request) else {
            return query
        }
        let body = try await collectBody(request)
        if body.isEmpty {
            return query
        }
        guard Self.hasMediaType(request, "application/x-www-form-urlencoded") else {
            throw IngestError(
                .unsupportedMediaType,
                field: "Content-Type",
                "must be application/x-www-form-urlencoded, got \(Self.mediaType(request).map { LegacyRegistrationForm.quoted($0) } ?? "none")"
            )
        }
        do throws(RegistrationError) {
            return try FormParameters(urlEncoded: body).merging(query)
        } catch {
            throw IngestError(error)
        }
    }
}
