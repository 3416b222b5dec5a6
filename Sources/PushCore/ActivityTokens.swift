import Foundation

/// Which Live Activity token of a device a registration is about (Apple: "Starting and updating Live
/// Activities with ActivityKit push notifications"): the device's push-to-start token for one
/// `ActivityAttributes` type, or the update token of one running activity, named by the app's own
/// activity or event id. A device has at most one token per slot; a new one replaces the old.
public enum ActivityTokenSlot: Sendable, Hashable {
    /// `Activity<Attributes>.pushToStartToken`: starts an activity of this attributes type.
    case pushToStart(attributesType: String)
    /// `Activity.pushToken`: updates and ends this one activity.
    case activity(id: String)

    /// `push_to_start` or `update`: the record's `kind`.
    public var kind: String {
        switch self {
        case .pushToStart: "push_to_start"
        case .activity: "update"
        }
    }

    /// The slot's name among the device's tokens: `pts:<attributes type>` or `activity:<id>`.
    public var field: String {
        switch self {
        case .pushToStart(let type): "pts:" + type
        case .activity(let id): "activity:" + id
        }
    }
}

/// A Live Activity token registration: the body of
/// `PUT /v1/apps/{app}/devices/{device}/push-to-start/{attributes type}` and
/// `PUT /v1/apps/{app}/devices/{device}/activities/{activity id}`, also the core of a
/// `push.registrations` message that names `push_to_start` or `activity`.
///
/// ```json
/// {"push_token": "80a3…", "attributes_type": "DeliveryAttributes", "expires_at": 1767254400}
/// ```
///
/// - `push_token` (required): the token ActivityKit handed out, hex like a device token;
/// - `attributes_type`: an update token's `ActivityAttributes` type (optional; for push-to-start
///   tokens the path names it);
/// - `expires_at`: when an update token stops being useful (seconds since 1970): the activity's end
///   plus the time it may stay on the Lock Screen. Default 12 hours after the registration (8 hours
///   of activity and 4 on the Lock Screen, Apple's limits); at most 7 days ahead. Push-to-start tokens
///   do not expire by time;
/// - `user`, `locale`, `environment`: as for a device, and taken from the device's record when
///   left out (an activity token belongs to the device that registered it).
public struct ActivityTokenRegistration: Sendable, Equatable {
    public var slot: ActivityTokenSlot
    public var pushToken: DeviceToken
    /// The `ActivityAttributes` type (the push-to-start slot's, or an update token's if given).
    public var attributesType: String?
    /// ms since 1970; nil for push-to-start tokens.
    public var expiresAt: Int64?
    public var user: String?
    public var locale: String?
    public var environment: AppConfiguration.Environment?

    public init(
        slot: ActivityTokenSlot, pushToken: DeviceToken, attributesType: String? = nil, expiresAt: Int64? = nil, user: String? = nil,
        locale: String? = nil, environment: AppConfiguration.Environment? = nil
    ) {
        self.slot = slot
        self.pushToken = pushToken
        if case .pushToStart(let type) = slot {
            self.attributesType = type
        } else {
            self.attributesType = attributesType
        }
        self.expiresAt = expiresAt
        self.user = user
        self.locale = locale
        self.environment = environment
    }

    public static let fieldNames: Set<String> = ["push_token", "attributes_type", "expires_at", "user", "locale", "environment"]
    /// The most characters an attributes type or activity id may have (both become part of Redis keys).
    public static let maximumNameLength = 256
    /// An update token's default lifetime: 12 hours (an activity lasts up to 8 hours, and stays on
    /// the Lock Screen up to 4 more).
    public static let defaultLifetime: Int64 = 12 * 3_600_000
    /// The furthest ahead `expires_at` may lie: 7 days.
    public static let maximumLifetime: Int64 = 7 * 24 * 3_600_000

    /// Checks a slot name from a path or message: an attributes type or activity id.
    ///
    /// - Throws: ``RegistrationError`` naming `field` when it is empty, too long, or has control
    ///   characters or whitespace.
    public static func name(_ text: String, field: String) throws(RegistrationError) -> String {
        guard !text.isEmpty, text.count <= maximumNameLength else {
            throw RegistrationError(.invalidField, field: field, "must be 1–\(maximumNameLength) characters (got \(text.count))")
        }
        guard !text.unicodeScalars.contains(where: { DeviceRegistration.isControl($0) || $0 == " " }) else {
            throw RegistrationError(
                .invalidField, field: field, "must not contain spaces or control characters, got \(DeviceRegistration.quoted(text))")
        }
        return text
    }

    /// Decodes and checks a body already parsed into a JSON object (``DeviceRegistration/decode(body:)``).
    ///
    /// - Parameter now: ms since 1970, for the default and the bound of `expires_at`.
    /// - Throws: ``RegistrationError`` naming the field.
    public init(slot: ActivityTokenSlot, json: [String: Any], now: Int64) throws(RegistrationError) {
        for key in json.keys.sorted() where !Self.fieldNames.contains(key) {
            throw RegistrationError(
                .invalidField, field: key,
                "is not a Live Activity token field (expected one of \(Self.fieldNames.sorted().joined(separator: ", ")))")
        }
        guard let tokenValue = json["push_token"], !(tokenValue is NSNull) else {
            throw RegistrationError(.missingField, field: "push_token", "is required (the token ActivityKit gave the app, in hex)")
        }
        guard let tokenText = tokenValue as? String else {
            throw RegistrationError(.invalidField, field: "push_token", "must be a string of hex digits, got \(JSONKind.of(tokenValue))")
        }
        let pushToken = try DeviceToken(normalizing: tokenText, field: "push_token")
        var attributesType: String?
        if let type = try DeviceRegistration.optionalString(json["attributes_type"], field: "attributes_type") {
            if case .pushToStart(let pathType) = slot, type != pathType {
                throw RegistrationError(
                    .invalidField, field: "attributes_type",
                    "must match the path's attributes type \(DeviceRegistration.quoted(pathType)) (or be left out), got \(DeviceRegistration.quoted(type))"
                )
            }
            attributesType = try Self.name(type, field: "attributes_type")
        }
        var expiresAt: Int64?
        if let value = json["expires_at"], !(value is NSNull) {
            guard case .activity = slot else {
                throw RegistrationError(.invalidField, field: "expires_at", "is for update tokens; push-to-start tokens do not expire by time")
            }
            guard let seconds = DeviceRegistration.wholeNumber(value), seconds > 0, seconds <= PushRequest.maximumExpiration else {
                throw RegistrationError(.invalidField, field: "expires_at", "must be a whole number of seconds since 1970")
            }
            let milliseconds = seconds * 1000
            guard milliseconds > now, milliseconds - now <= Self.maximumLifetime else {
                throw RegistrationError(
                    .invalidField, field: "expires_at",
                    "must lie in the next 7 days (seconds since 1970), got \(seconds)\(milliseconds <= now ? ", which has passed" : "")")
            }
            expiresAt = milliseconds
        } else if case .activity = slot {
            expiresAt = now + Self.defaultLifetime
        }
        var environment: AppConfiguration.Environment?
        if let name = try DeviceRegistration.optionalString(json["environment"], field: "environment") {
            guard let value = AppConfiguration.Environment(rawValue: name) else {
                throw RegistrationError(
                    .invalidField, field: "environment", "must be \"production\" or \"sandbox\", got \(DeviceRegistration.quoted(name))")
            }
            environment = value
        }
        self.init(
            slot: slot, pushToken: pushToken, attributesType: attributesType, expiresAt: expiresAt,
            user: try DeviceRegistration.user(json["user"]), locale: try DeviceRegistration.locale(json["locale"]), environment: environment)
    }
}

/// A stored Live Activity token (what `GET …/push-to-start/{type}` and `GET …/activities/{id}` answer).
public struct ActivityTokenRecord: Sendable, Equatable {
    public var app: String
    /// The device the token belongs to.
    public var device: DeviceToken
    public var slot: ActivityTokenSlot
    public var pushToken: DeviceToken
    public var attributesType: String?
    public var user: String?
    public var locale: String?
    public var environment: AppConfiguration.Environment
    /// ms since 1970.
    public var registeredAt: Int64
    public var updatedAt: Int64
    public var expiresAt: Int64?

    public init(
        app: String, device: DeviceToken, slot: ActivityTokenSlot, pushToken: DeviceToken, attributesType: String?, user: String?,
        locale: String?, environment: AppConfiguration.Environment, registeredAt: Int64, updatedAt: Int64, expiresAt: Int64?
    ) {
        self.app = app
        self.device = device
        self.slot = slot
        self.pushToken = pushToken
        self.attributesType = attributesType
        self.user = user
        self.locale = locale
        self.environment = environment
        self.registeredAt = registeredAt
        self.updatedAt = updatedAt
        self.expiresAt = expiresAt
    }

    /// `{"activity_id"?, "app", "attributes_type"?, "device", "environment", "expires_at"? (s), "kind",
    /// "locale"?, "push_token", "registered_at", "updated_at", "user"?}` (keys sorted, times in ms but
    /// `expires_at` in seconds like the request).
    public func jsonData() -> [UInt8] {
        var writer = RecordJSONWriter()
        writer.object { writer in
            if case .activity(let id) = slot { writer.member("activity_id") { $0.string(id) } }
            writer.member("app") { $0.string(app) }
            if let attributesType { writer.member("attributes_type") { $0.string(attributesType) } }
            writer.member("device") { $0.string(device.hex) }
            writer.member("environment") { $0.string(environment.rawValue) }
            if let expiresAt { writer.member("expires_at") { $0.raw(String(expiresAt / 1000)) } }
            writer.member("kind") { $0.string(slot.kind) }
            if let locale { writer.member("locale") { $0.string(locale) } }
            writer.member("push_token") { $0.string(pushToken.hex) }
            writer.member("registered_at") { $0.raw(String(registeredAt)) }
            writer.member("updated_at") { $0.raw(String(updatedAt)) }
            if let user { writer.member("user") { $0.string(user) } }
        }
        return writer.bytes
    }
}
