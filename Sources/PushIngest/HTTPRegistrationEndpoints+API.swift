import Foundation
import Hummingbird
import PushCore
import TokenRegistry

/// `PUT`, `GET` and `DELETE /v1/apps/{app}/devices/{token}` (CONTRACT.md, "Registration HTTP API").
///
/// Every request goes: the app (`404 unknown_app`) → `Authorization: Bearer` (`401`/`403`) → the token
/// (`400 invalid_token`) → the client and app rate limits (`429`) → the body (`415`, `413`, `400`) →
/// Redis (`503 unavailable`). Refusals before the rate limits still count against the client's.
///
/// | request | success |
/// |---|---|
/// | `PUT` JSON body | `201` with the record when the token is new, `200` when it replaced a record |
/// | `GET` | `200` with the record; `404 not_found` when the token is not registered |
/// | `DELETE` | `204`, also when the token was not registered (idempotent: a retried delete succeeds) |
extension HTTPRegistrationEndpoints {
    func put(_ request: Request, context: IngestRequestContext) async -> Response {
        await respond(.put, context: context) { () async throws(IngestError) -> Answer in
            let (app, token) = try await authorizedTarget(request, context: context)
            guard Self.hasMediaType(request, "application/json") else {
                throw IngestError(
                    .unsupportedMediaType,
                    field: "Content-Type",
                    "must be application/json, got \(Self.mediaType(request).map { LegacyRegistrationForm.quoted($0) } ?? "none")"
                )
            }
            let body = try await collectBody(request)
            let registration: DeviceRegistration
            do throws(RegistrationError) {
                registration = try DeviceRegistration(json: try DeviceRegistration.decode(body: body))
            } catch {
                throw IngestError(error)
            }
            let (created, record) = try await upsert(app: app, token: token, registration: registration, client: context.clientAddress)
            return Answer(status: created ? .created : .ok, body: record.jsonData(), outcome: created ? "created" : "updated")
        }
    }

    func get(_ request: Request, context: IngestRequestContext) async -> Response {
        await respond(.get, context: context) { () async throws(IngestError) -> Answer in
            let (app, token) = try await authorizedTarget(request, context: context)
            let record: DeviceRecord?
            do throws(RegistryError) {
                record = try await registry.record(app: app.bundleID, token: token)
            } catch {
                throw IngestError.registry(error)
            }
            guard let record else {
                throw IngestError(.notFound, field: "token", "is not registered for app \(LegacyRegistrationForm.quoted(app.bundleID))")
            }
            return Answer(status: .ok, body: record.jsonData(), outcome: "found")
        }
    }

    func delete(_ request: Request, context: IngestRequestContext) async -> Response {
        await respond(.delete, context: context) { () async throws(IngestError) -> Answer in
            let (app, token) = try await authorizedTarget(request, context: context)
            let removed: Bool
            do throws(RegistryError) {
                removed = try await registry.delete(app: app.bundleID, token: token, at: Self.nowMilliseconds())
            } catch {
                throw IngestError.registry(error)
            }
            return Answer(status: .noContent, body: nil, outcome: removed ? "deleted" : "absent")
        }
    }

    /// The path's app and token once the caller is authenticated for the app and within its limits.
    func authorizedTarget(_ request: Request, context: IngestRequestContext) async throws(IngestError) -> (AppConfiguration, DeviceToken) {
        let client = context.clientAddress
        let app: AppConfiguration
        let token: DeviceToken
        do throws(IngestError) {
            app = try authenticatedApp(request, bundleID: context.parameters.get("app") ?? "")
            let rawToken = context.parameters.get("token") ?? ""
            do throws(RegistrationError) {
                // Only an NSData description (`%3C…%20…%3E`) needs decoding; hex tokens are the common case.
                let decoded = rawToken.contains("%") ? rawToken.removingPercentEncoding ?? rawToken : rawToken
                token = try DeviceToken(normalizing: decoded, field: "token")
            } catch {
                throw IngestError(error)
            }
        } catch {
            throw await refusal(error, client: client)
        }
        try await enforceRateLimits(client: client, app: app.bundleID)
        return (app, token)
    }
}
