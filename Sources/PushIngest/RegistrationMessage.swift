import Foundation
public import PushCore

/// One `push.registrations` message, decoded and checked (CONTRACT.md, "Registration HTTP API"; issue
/// "push-ingest", queue ingestion).
///
/// The body is the `PUT /v1/apps/{app}/devices/{token}` body plus the two path parts and an optional
/// operation:
///
/// ```json
/// {"app": "com.example.game", "token": "740f4707…", "user": "alice", "topics": ["news"], …}
/// {"app": "com.example.game", "token": "740f4707…", "op": "delete"}
/// ```
///
/// - `app` (required): a bundle id of the apps file, exactly;
/// - `token` (required): normalised like the HTTP path's token (`<`, `>` and spaces stripped, any case);
/// - `op`: `"upsert"` (the default) or `"delete"`; a delete ignores the registration fields;
/// - `registered_at`: when the registration or deletion happened at the producer (ms since 1970),
///   so that redeliveries out of order cannot revive older data (``RegistrationEventTime``); without
///   it, the moment push-ingest processes the message;
/// - the rest: the registration fields, checked by ``PushCore/DeviceRegistration/init(json:)``.
///
/// A message about one of the device's Live Activity tokens names its slot, like the HTTP path:
///
/// ```json
/// {"app": "com.example.game", "token": "740f4707…", "push_to_start": "MatchAttributes", "push_token": "80a3…"}
/// {"app": "com.example.game", "token": "740f4707…", "activity": "match-1234", "push_token": "c0ff…", "expires_at": 1767254400}
/// {"app": "com.example.game", "token": "740f4707…", "activity": "match-1234", "op": "delete"}
/// ```
///
/// and the rest is checked by ``PushCore/ActivityTokenRegistration/init(slot:json:now:)``.
///
/// Pure: the consumer does the I/O.
public enum RegistrationMessage: Sendable, Equatable {
    case upsert(app: AppConfiguration, token: DeviceToken, registration: DeviceRegistration)
    case delete(app: AppConfiguration, token: DeviceToken)
    /// A Live Activity token of the device `token`.
    case upsertActivityToken(app: AppConfiguration, token: DeviceToken, registration: ActivityTokenRegistration)
    case deleteActivityToken(app: AppConfiguration, token: DeviceToken, slot: ActivityTokenSlot)

    /// The fields a message adds to the registration body.
    public static let envelopeFields: Set<String> = ["app", "token", "op", "registered_at", "push_to_start", "activity"]

    /// Decodes `body`.
    ///
    /// - Throws: ``PushCore/RegistrationError`` naming the field (`body`, `app`, `token`, `op`,
    ///   `registered_at`, `settings.alert`, …): the reason a dead-lettered message carries.
    public init(body: [UInt8], apps: AppsFile, now: Int64 = RegistrationMessage.wallClock()) throws(RegistrationError) {
        self = try Self.decode(body: body, apps: apps, now: now).message
    }

    /// Milliseconds since 1970 by the wall clock.
    public static func wallClock() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// Decodes `body` and its producer's `registered_at` (nil when absent; checked against the clock
    /// by ``RegistrationEventTime/resolve(_:now:)``).
    ///
    /// `now` (ms since 1970) dates a Live Activity token's default expiry when the message has no
    /// `registered_at`.
    public static func decode(
        body: [UInt8], apps: AppsFile, now: Int64 = RegistrationMessage.wallClock()
    ) throws(RegistrationError) -> (message: RegistrationMessage, registeredAt: Int64?) {
        var object = try DeviceRegistration.decode(body: body)
        var registeredAt: Int64?
        if let value = object.removeValue(forKey: "registered_at") {
            guard let whole = DeviceRegistration.wholeNumber(value), whole >= 0 else {
                throw RegistrationError(.invalidField, field: "registered_at", "must be a whole number of milliseconds since 1970")
            }
            registeredAt = whole
        }
        // A registered_at outside its window is refused naming it later (RegistrationEventTime); the
        // token's expiry is dated by the message's time only when that time is sane.
        let eventTime = (try? RegistrationEventTime.resolve(registeredAt, now: now)) ?? now
        return (try Self.message(from: &object, apps: apps, now: eventTime), registeredAt)
    }

    private static func message(from object: inout [String: Any], apps: AppsFile, now: Int64) throws(RegistrationError) -> RegistrationMessage {
        guard let appValue = object.removeValue(forKey: "app") else {
            throw RegistrationError(.missingField, field: "app", "is required (the app's bundle id)")
        }
        guard let bundleID = appValue as? String else {
            throw RegistrationError(.invalidField, field: "app", "must be a string (the app's bundle id)")
        }
        guard let app = apps.app(bundleID: bundleID) else {
            throw RegistrationError(.invalidField, field: "app", "names no configured app: \(Self.quoted(bundleID))")
        }
        guard let tokenValue = object.removeValue(forKey: "token") else {
            throw RegistrationError(.missingField, field: "token", "is required")
        }
        guard let tokenText = tokenValue as? String else {
            throw RegistrationError(.invalidField, field: "token", "must be a string of hex digits")
        }
        let token = try DeviceToken(normalizing: tokenText)
        let operation: String
        switch object.removeValue(forKey: "op") {
        case nil: operation = "upsert"
        case let value as String: operation = value
        default: throw RegistrationError(.invalidField, field: "op", "must be \"upsert\" or \"delete\"")
        }
        if let slot = try Self.activitySlot(from: &object) {
            switch operation {
            case "upsert":
                return .upsertActivityToken(app: app, token: token, registration: try ActivityTokenRegistration(slot: slot, json: object, now: now))
            case "delete":
                return .deleteActivityToken(app: app, token: token, slot: slot)
            default:
                throw RegistrationError(.invalidField, field: "op", "must be \"upsert\" or \"delete\", got \(Self.quoted(operation))")
            }
        }
        switch operation {
        case "upsert":
            return .upsert(app: app, token: token, registration: try DeviceRegistration(json: object))
        case "delete":
            return .delete(app: app, token: token)
        default:
            throw RegistrationError(.invalidField, field: "op", "must be \"upsert\" or \"delete\", got \(Self.quoted(operation))")
        }
    }

    /// The Live Activity token slot the message names (`push_to_start` or `activity`), if any.
    private static func activitySlot(from object: inout [String: Any]) throws(RegistrationError) -> ActivityTokenSlot? {
        let pushToStart = object.removeValue(forKey: "push_to_start")
        let activity = object.removeValue(forKey: "activity")
        switch (pushToStart, activity) {
        case (nil, nil):
            return nil
        case (let type?, nil):
            guard let type = type as? String else {
                throw RegistrationError(.invalidField, field: "push_to_start", "must be a string (the ActivityAttributes type)")
            }
            return .pushToStart(attributesType: try ActivityTokenRegistration.name(type, field: "push_to_start"))
        case (nil, let id?):
            guard let id = id as? String else {
                throw RegistrationError(.invalidField, field: "activity", "must be a string (the app's activity or event id)")
            }
            return .activity(id: try ActivityTokenRegistration.name(id, field: "activity"))
        case (_?, _?):
            throw RegistrationError(.invalidField, field: "activity", "a message names one slot: push_to_start or activity, not both")
        }
    }

    public var app: AppConfiguration {
        switch self {
        case .upsert(let app, _, _), .delete(let app, _), .upsertActivityToken(let app, _, _), .deleteActivityToken(let app, _, _): app
        }
    }

    /// The device the message is about.
    public var token: DeviceToken {
        switch self {
        case .upsert(_, let token, _), .delete(_, let token), .upsertActivityToken(_, let token, _), .deleteActivityToken(_, let token, _): token
        }
    }

    /// `upsert`, `delete`, `upsert_activity_token` or `delete_activity_token`, for logs.
    public var operationName: String {
        switch self {
        case .upsert: "upsert"
        case .delete: "delete"
        case .upsertActivityToken: "upsert_activity_token"
        case .deleteActivityToken: "delete_activity_token"
        }
    }

    private static func quoted(_ text: String) -> String {
        let shown = text.count > 64 ? String(text.prefix(64)) + "…" : text
        return "\"\(shown.unicodeScalars.map { $0.escaped(asASCII: false) }.joined())\""
    }
}

/// When a queued registration happened: the producer's `registered_at`, bounded to a sane window
/// around the moment it is processed, or that moment. The registry applies a registration only if it
/// is newer than what it holds (``TokenRegistry/TokenRegistry/upsert(app:token:registration:defaultEnvironment:now:)``).
public enum RegistrationEventTime {
    /// The oldest `registered_at` accepted: a week (redeliveries and retry tiers take minutes; the
    /// registry remembers deletions for 8 days, ``TokenRegistry/TokenRegistry/tombstoneLifetime``).
    public static let maximumAge: Int64 = 7 * 24 * 3_600_000
    /// The furthest into the future a producer's clock may be: 5 minutes.
    public static let maximumSkew: Int64 = 5 * 60_000

    /// `registeredAt` if it lies within the window around `now`, else a ``PushCore/RegistrationError``
    /// naming `registered_at`; `now` when the message carries none.
    public static func resolve(_ registeredAt: Int64?, now: Int64) throws(RegistrationError) -> Int64 {
        guard let registeredAt else { return now }
        let (earliest, _) = now.subtractingReportingOverflow(maximumAge)
        let (latest, overflow) = now.addingReportingOverflow(maximumSkew)
        guard registeredAt >= earliest, overflow || registeredAt <= latest else {
            throw RegistrationError(
                .invalidField, field: "registered_at",
                "must lie between 7 days before and 5 minutes after the moment push-ingest processes it (ms since 1970), got \(registeredAt)")
        }
        return registeredAt
    }
}
