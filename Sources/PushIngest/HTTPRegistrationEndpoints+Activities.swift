import Foundation
import Hummingbird
import PushCore
import TokenRegistry

/// Live Activity tokens of a registered device (issue 13):
///
/// | path | slot |
/// |---|---|
/// | `/v1/apps/{app}/devices/{token}/push-to-start/{attributes type}` | the device's push-to-start token for that `ActivityAttributes` type |
/// | `/v1/apps/{app}/devices/{token}/activities/{activity id}` | the update token of that activity (the app's own activity or event id) |
///
/// `PUT` with an ``PushCore/ActivityTokenRegistration`` body (`{"push_token": "…"}` and optional
/// `attributes_type`, `expires_at`, `user`, `locale`, `environment`) answers `201` (new) or `200`
/// with the stored record; `GET` answers the record or `404 not_found`; `DELETE` answers `204`
/// (also when the slot was empty). The steps and errors are those of the device endpoints
/// (`HTTPRegistrationEndpoints+API.swift`); the device itself need not be registered (its user,
/// locale and environment are used when it is).
extension HTTPRegistrationEndpoints {
    func putActivityToken(_ request: Request, context: IngestRequestContext) async -> Response {
        await respond(.activityPut, context: context) { () async throws(IngestError) -> Answer in
            let (app, device, slot) = try await authorizedSlot(request, context: context)
            guard Self.hasMediaType(request, "application/json") else {
                throw IngestError(
                    .unsupportedMediaType, field: "Content-Type",
                    "must be application/json, got \(Self.mediaType(request).map { LegacyRegistrationForm.quoted($0) } ?? "none")")
            }
            let body = try await collectBody(request)
            let now = Self.nowMilliseconds()
            let registration: ActivityTokenRegistration
            do throws(RegistrationError) {
                registration = try ActivityTokenRegistration(slot: slot, json: try DeviceRegistration.decode(body: body), now: now)
            } catch {
                throw IngestError(error)
            }
            // A device the registry does not hold is charged to the new-device budgets: made-up
            // devices cannot each take a cap's worth of slots beyond them.
            try await enforceNewTokenBudgets(app: app, token: device, client: context.clientAddress)
            let stored: ActivityTokenUpserted
            do throws(RegistryError) {
                stored = try await registry.upsertActivityToken(
                    app: app.bundleID, device: device, registration: registration, defaultEnvironment: app.environment, now: now,
                    maxSlots: app.ingest.maxActivitySlots)
            } catch {
                throw IngestError.registry(error)
            }
            if let cap = stored.refusedAtCap {
                throw IngestError(.conflict, field: "device", IngestError.slotCapMessage(cap))
            }
            guard stored.applied else {
                throw IngestError(.conflict, field: "push_token", "a newer registration or deletion of this Live Activity token is already stored")
            }
            return Answer(status: stored.created ? .created : .ok, body: stored.record.jsonData(), outcome: stored.created ? "created" : "updated")
        }
    }

    func getActivityToken(_ request: Request, context: IngestRequestContext) async -> Response {
        await respond(.activityGet, context: context) { () async throws(IngestError) -> Answer in
            let (app, device, slot) = try await authorizedSlot(request, context: context)
            let record: ActivityTokenRecord?
            do throws(RegistryError) {
                record = try await registry.activityToken(app: app.bundleID, device: device, slot: slot)
            } catch {
                throw IngestError.registry(error)
            }
            guard let record else {
                throw IngestError(.notFound, field: Self.slotField(slot), "has no Live Activity token registered for this device")
            }
            return Answer(status: .ok, body: record.jsonData(), outcome: "found")
        }
    }

    func deleteActivityToken(_ request: Request, context: IngestRequestContext) async -> Response {
        await respond(.activityDelete, context: context) { () async throws(IngestError) -> Answer in
            let (app, device, slot) = try await authorizedSlot(request, context: context)
            let removed: Bool
            do throws(RegistryError) {
                removed = try await registry.deleteActivityToken(app: app.bundleID, device: device, slot: slot, at: Self.nowMilliseconds())
            } catch {
                throw IngestError.registry(error)
            }
            return Answer(status: .noContent, body: nil, outcome: removed ? "deleted" : "absent")
        }
    }

    /// The path parameter naming the slot, for messages.
    static func slotField(_ slot: ActivityTokenSlot) -> String {
        switch slot {
        case .pushToStart: "attributes_type"
        case .activity: "activity_id"
        }
    }

    /// The path's app, device and slot once the caller is authenticated for the app and within its limits.
    private func authorizedSlot(
        _ request: Request, context: IngestRequestContext
    ) async throws(IngestError) -> (AppConfiguration, DeviceToken, ActivityTokenSlot) {
        let (app, device) = try await authorizedTarget(request, context: context)
        let slot: ActivityTokenSlot
        do throws(RegistrationError) {
            if let type = context.parameters.get("attributes_type") {
                slot = .pushToStart(attributesType: try ActivityTokenRegistration.name(Self.pathComponent(type), field: "attributes_type"))
            } else {
                let id = context.parameters.get("activity_id") ?? ""
                slot = .activity(id: try ActivityTokenRegistration.name(Self.pathComponent(id), field: "activity_id"))
            }
        } catch {
            throw IngestError(error)
        }
        return (app, device, slot)
    }

    /// A path parameter with its percent-encoding undone (an activity id may hold any character).
    private static func pathComponent(_ raw: String) -> String {
        raw.contains("%") ? raw.removingPercentEncoding ?? raw : raw
    }
}
