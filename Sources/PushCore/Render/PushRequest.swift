/// A push request v1 (CONTRACT.md, "Push request v1"), decoded and checked: the body of a message to
/// exchange `push` with routing key `request`.
///
/// ```json
/// {"id": "order-4711-shipped", "app": "com.example.shop", "to": {"users": ["alice"]},
///  "payload": {"aps": {"alert": {"loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]}}},
///  "localize": "device", "push_type": "alert", "priority": 10, "expiration": 1767225600, "collapse_id": "order-4711"}
/// ```
///
/// Decoded with ``init(body:apps:)``; every broken rule is a ``PushRequestError`` naming the field.
public struct PushRequest: Sendable, Equatable {
    /// The idempotency key: 1–128 characters, no control characters.
    public var id: String
    /// The app's bundle id (a configured app).
    public var app: AppConfiguration
    public var target: PushTarget
    public var payload: NotificationPayload
    public var localization: LocalizationMode
    /// The push type: as given, or inferred (``inferPushType(for:)``).
    public var pushType: PushType
    /// The `apns-priority`: as given, or the push type's default.
    public var priority: Int
    /// Seconds since 1970, at most ``maximumExpiration``; 0 = try once; nil = APNs' default.
    public var expiration: Int64?
    /// `apns-collapse-id`, at most 64 bytes, no control characters.
    public var collapseID: String?

    public init(
        id: String, app: AppConfiguration, target: PushTarget, payload: NotificationPayload, localization: LocalizationMode = .device,
        pushType: PushType, priority: Int, expiration: Int64? = nil, collapseID: String? = nil
    ) {
        self.id = id
        self.app = app
        self.target = target
        self.payload = payload
        self.localization = localization
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
    }
}

/// Who a push request goes to (`to`): exactly one of these.
public enum PushTarget: Sendable, Equatable {
    /// `{"tokens": [hex…]}`: these devices (normalised, repeats dropped, first kept).
    case tokens([DeviceToken])
    /// `{"users": [id…]}`: every device of these users (repeats dropped).
    case users([String])
    /// `{"topic": "name"}`: every device subscribed to the topic at registration.
    case topic(String)
    /// `{"all": true}`: every device of the app.
    case all
    /// `{"activity": "<id>"}` or `{"activity": {"users": […]}}`: the update tokens of Live Activities
    /// (registered per activity with the app's own activity or event id), for `update` and `end`.
    case activity(ActivityAudience)
    /// `{"push_to_start": {"users": […]}}` or `{"push_to_start": {"all": true}}`: the push-to-start
    /// tokens of the payload's `attributes-type`, for `start`.
    case pushToStart(PushToStartAudience)
    /// `{"channel": "<channel id>"}`: one broadcast on an iOS 18 broadcast channel, however many
    /// devices listen (`update` and `end`).
    case channel(String)

    /// The `to` key naming this target, for messages.
    public var name: String {
        switch self {
        case .tokens: "tokens"
        case .users: "users"
        case .topic: "topic"
        case .all: "all"
        case .activity: "activity"
        case .pushToStart: "push_to_start"
        case .channel: "channel"
        }
    }

    /// Whether the target reaches Live Activity tokens (or a channel) rather than devices: only a
    /// `liveactivity` push can go there.
    public var isLiveActivityTarget: Bool {
        switch self {
        case .activity, .pushToStart, .channel: true
        case .tokens, .users, .topic, .all: false
        }
    }
}

/// Whose update tokens an `activity` target reaches.
public enum ActivityAudience: Sendable, Equatable {
    /// Every update token registered for this activity id (on any device).
    case id(String)
    /// Every update token of these users' activities, of one attributes type when given (an
    /// update's `content-state` fits only its own activity type, and a user may run several).
    case users([String], attributesType: String?)
}

/// Whose push-to-start tokens a `push_to_start` target reaches; the attributes type is the payload's.
public enum PushToStartAudience: Sendable, Equatable {
    case users([String])
    case all
}

/// Where localisation keys are resolved (`localize`).
public enum LocalizationMode: String, Sendable, Hashable, CaseIterable {
    /// The keys go to the device, whose app bundle has the strings (the default).
    case device
    /// Resolved per device locale from the server's catalogs; keys no catalog has go to the device.
    case server
}

extension PushRequest {
    /// The fields of a push request.
    public static let fieldNames: [String] = ["id", "app", "to", "payload", "localize", "push_type", "priority", "expiration", "collapse_id"]
    public static let maximumIDLength = 128
    public static let maximumCollapseIDBytes = 64
    /// The latest `expiration`: 9999-12-31T23:59:59Z. A later one is no date (APNs refuses long
    /// ones with `BadExpirationDate`), most likely milliseconds sent for seconds.
    public static let maximumExpiration: Int64 = 253_402_300_799
    /// The most tokens one `to.tokens` may list; larger audiences belong in a topic.
    public static let maximumTokenCount = 100_000
    /// The most users one `to.users` may list.
    public static let maximumUserCount = 10_000

    /// Decodes and checks a request body.
    ///
    /// - Throws: ``PushRequestError`` naming the field: `body` (not JSON), `id`, `app` (missing, or no
    ///   configured app), `to`, `to.tokens[3]`, `payload.aps.…`, `localize`, `push_type`, `priority`,
    ///   `expiration`, `collapse_id`.
    public init(body: [UInt8], apps: AppsFile) throws(PushRequestError) {
        let json: JSONValue
        do {
            json = try JSONValue.parse(body)
        } catch {
            throw PushRequestError(.invalidJSON, field: "body", "is not valid JSON (\(error))")
        }
        try self.init(json: json, apps: apps)
    }

    /// Checks a request already parsed into a ``JSONValue``.
    public init(json: JSONValue, apps: AppsFile) throws(PushRequestError) {
        guard case .object(let members) = json else {
            throw PushRequestError(.invalidJSON, field: "body", "must be a JSON object, got \(json.kindDescription)")
        }
        for member in members where !Self.fieldNames.contains(member.key) {
            throw PushRequestError(
                .invalidField, field: member.key, "is not a push request field (expected one of \(Self.fieldNames.joined(separator: ", ")))")
        }
        let id = try Self.identifier(json["id"])
        guard let appValue = json["app"] else { throw PushRequestError(.missingField, field: "app", "is required (the app's bundle id)") }
        guard case .string(let bundleID) = appValue else {
            throw PushRequestError(.invalidField, field: "app", "must be a string (the app's bundle id), got \(appValue.kindDescription)")
        }
        guard let app = apps.app(bundleID: bundleID) else {
            throw PushRequestError(.invalidField, field: "app", "names no configured app: \(PushRequestError.quoted(bundleID))")
        }
        let target = try Self.target(json["to"])
        guard let payloadValue = json["payload"] else {
            throw PushRequestError(.missingField, field: "payload", "is required (the APNs payload: {\"aps\": {…}})")
        }
        let payload = try NotificationPayload(validating: payloadValue)
        var localization = LocalizationMode.device
        if let value = json["localize"] {
            guard let text = value.stringValue, let mode = LocalizationMode(rawValue: text) else {
                throw PushRequestError(
                    .invalidField, field: "localize", "must be \"device\" or \"server\", got \(NotificationPayload.describe(value))")
            }
            localization = mode
        }
        var pushType: PushType?
        if let value = json["push_type"] {
            guard let text = value.stringValue else {
                throw PushRequestError(.invalidField, field: "push_type", "must be a string, got \(value.kindDescription)")
            }
            if text == "mdm" {
                throw PushRequestError(
                    .invalidField, field: "push_type", "mdm pushes are not supported (they use the MDM certificate's topic, not an app's)")
            }
            guard let type = PushType(rawValue: text) else {
                throw PushRequestError(
                    .invalidField, field: "push_type",
                    "must be one of \(PushType.acceptedInRequests.map(\.rawValue).joined(separator: ", ")), got \(PushRequestError.quoted(text))")
            }
            pushType = type
        }
        var priority: Int?
        if let value = json["priority"] {
            guard let number = value.int64Value, [10, 5, 1].contains(number) else {
                throw PushRequestError(.invalidField, field: "priority", "must be 10, 5 or 1, got \(NotificationPayload.describe(value))")
            }
            priority = Int(number)
        }
        var expiration: Int64?
        if let value = json["expiration"] {
            guard let number = value.int64Value, number >= 0 else {
                throw PushRequestError(
                    .invalidField, field: "expiration",
                    "must be seconds since 1970 (0 = try once) up to \(Self.maximumExpiration), got \(NotificationPayload.describe(value))")
            }
            guard number <= Self.maximumExpiration else {
                throw PushRequestError(
                    .invalidField, field: "expiration",
                    "must be seconds since 1970 up to \(Self.maximumExpiration) (9999-12-31), got \(number)\(number / 1000 <= Self.maximumExpiration ? " (milliseconds? send seconds)" : "")"
                )
            }
            expiration = number
        }
        var collapseID: String?
        if let value = json["collapse_id"] {
            guard let text = value.stringValue, !text.isEmpty else {
                throw PushRequestError(.invalidField, field: "collapse_id", "must be a non-empty string, got \(NotificationPayload.describe(value))")
            }
            guard text.utf8.count <= Self.maximumCollapseIDBytes else {
                throw PushRequestError(
                    .invalidField, field: "collapse_id", "must be at most \(Self.maximumCollapseIDBytes) bytes (got \(text.utf8.count))")
            }
            guard !Self.containsControlCharacters(text) else {
                throw PushRequestError(.invalidField, field: "collapse_id", "must not contain control characters (it is sent as an HTTP/2 header)")
            }
            collapseID = text
        }
        let type = pushType ?? Self.inferPushType(for: payload)
        try Self.checkCombination(payload: payload, pushType: type, explicit: pushType != nil)
        try Self.checkTarget(target, payload: payload, pushType: type)
        if type == .liveactivity {
            // Apple: "Certificate-based authentication is not supported for these APNs pushes."
            guard case .token = app.apns else {
                throw PushRequestError(
                    .invalidCombination, field: "push_type",
                    "liveactivity pushes need token-based authentication; app \(PushRequestError.quoted(app.bundleID)) uses a certificate")
            }
        }
        let resolvedPriority = priority ?? type.defaultPriority
        let isBroadcast: Bool
        if case .channel = target { isBroadcast = true } else { isBroadcast = false }
        let allowed = type.allowedPriorities(broadcast: isBroadcast)
        guard allowed.contains(resolvedPriority) else {
            throw PushRequestError(
                .invalidCombination, field: "priority",
                "\(resolvedPriority) is not allowed for \(type) \(isBroadcast ? "broadcasts" : "pushes") (use \(allowed.map(String.init).joined(separator: " or ")))"
            )
        }
        self.init(
            id: id, app: app, target: target, payload: payload, localization: localization, pushType: type,
            priority: resolvedPriority, expiration: expiration, collapseID: collapseID)
    }

    /// The push type of a request that names none: `liveactivity` when `aps` has Live Activity keys,
    /// `background` when it has `content-available` 1 and no alert, badge or sound, `alert` otherwise.
    public static func inferPushType(for payload: NotificationPayload) -> PushType {
        if !payload.presentLiveActivityKeys.isEmpty { return .liveactivity }
        if payload.isContentAvailable, !payload.hasAlert, !payload.hasBadge, !payload.hasSound { return .background }
        return .alert
    }

    /// The most characters an activity id, attributes type or channel id may have.
    public static let maximumActivityFieldLength = 256

    /// Whether `channelID` is a channel id as APNs makes them: standard base64 (`A–Z a–z 0–9 + /`,
    /// `=` padding, a multiple of 4 bytes). Anything else APNs refuses with `BadChannelId`.
    public static func isWellFormedChannelID(_ channelID: String) -> Bool {
        let bytes = Array(channelID.utf8)
        guard !bytes.isEmpty, bytes.count % 4 == 0 else { return false }
        let padding = bytes.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return false }
        return bytes.dropLast(padding).allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
        }
    }

    /// The rules that tie the target to the push type and the Live Activity event: activity tokens
    /// update and end the activity they belong to, push-to-start tokens only start one (Apple:
    /// "Starting and updating Live Activities with ActivityKit push notifications"), and a channel
    /// carries updates and ends of the activities that subscribed to it.
    static func checkTarget(_ target: PushTarget, payload: NotificationPayload, pushType: PushType) throws(PushRequestError) {
        switch target {
        case .users, .topic, .all:
            guard pushType != .liveactivity else {
                // Device tokens take no Live Activity pushes: APNs answers DeviceTokenNotForTopic, which
                // push-feedback takes for a dead token, so one such request would unregister every device.
                throw PushRequestError(
                    .invalidCombination, field: "to.\(target.name)",
                    "reaches device tokens, which take no Live Activity pushes; use to.activity, to.push_to_start or to.channel (or list activity tokens in to.tokens)"
                )
            }
        case .tokens, .activity, .pushToStart, .channel:
            break
        }
        guard target.isLiveActivityTarget else { return }
        let field = "to.\(target.name)"
        guard pushType == .liveactivity else {
            throw PushRequestError(.invalidCombination, field: field, "is for Live Activity pushes (push_type liveactivity), got \(pushType)")
        }
        let event = payload.json["aps"]?["event"]?.stringValue ?? ""
        switch target {
        case .pushToStart:
            guard event == "start" else {
                throw PushRequestError(
                    .invalidCombination, field: "payload.aps.event",
                    "must be start for push-to-start tokens (got \(event)); update tokens take update and end")
            }
        case .activity, .channel:
            guard event == "update" || event == "end" else {
                throw PushRequestError(
                    .invalidCombination, field: "payload.aps.event",
                    "must be update or end for \(target.name == "channel" ? "a channel" : "activity update tokens") (got \(event)); start a Live Activity with to.push_to_start"
                )
            }
        case .tokens, .users, .topic, .all:
            break
        }
    }

    /// The payload's `aps.attributes-type` (a `start` event's), which picks the push-to-start tokens.
    public var attributesType: String? { payload.json["aps"]?["attributes-type"]?.stringValue }

    /// The rules that tie the payload to the push type.
    static func checkCombination(payload: NotificationPayload, pushType: PushType, explicit: Bool) throws(PushRequestError) {
        let aps = payload.aps
        let keys = Set(aps.map(\.key))
        func refuse(_ key: String, _ reason: String) -> PushRequestError {
            PushRequestError(.invalidCombination, field: "payload.aps.\(key)", reason)
        }
        if pushType != .liveactivity, let key = payload.presentLiveActivityKeys.first {
            throw refuse(key, "is a Live Activity key; it needs push_type liveactivity (got \(pushType))")
        }
        if pushType != .widgets, pushType != .controls, keys.contains("content-changed") {
            throw refuse("content-changed", "is for widgets and controls pushes (got \(pushType))")
        }
        if pushType != .liveactivity, let score = payload.json["aps"]?["relevance-score"]?.doubleValue, score > 1 {
            throw refuse("relevance-score", "must be from 0 to 1 (larger scores are for Live Activities)")
        }
        if pushType != .liveactivity, case .object(let alert)? = payload.json["aps"]?["alert"] {
            for member in alert {
                if member.key == "sound" {
                    throw refuse("alert.sound", "is for Live Activity alerts; put sound in aps (got \(pushType))")
                }
                if member.key == "title" || member.key == "body", case .object = member.value {
                    throw refuse(
                        "alert.\(member.key)",
                        "the {loc-key, loc-args} form is for Live Activities; use \(member.key == "title" ? "title-loc-key" : "loc-key") (got \(pushType))"
                    )
                }
            }
        }
        switch pushType {
        case .alert:
            if !payload.hasAlert, !payload.hasBadge, !payload.hasSound {
                if payload.isContentAvailable {
                    throw PushRequestError(
                        .invalidCombination, field: "push_type",
                        "alert needs an alert, badge or sound (a push with only content-available is background)")
                }
                throw PushRequestError(
                    .invalidCombination, field: "payload.aps",
                    "has nothing to show: give an alert, badge or sound (or content-available 1 for a background push)")
            }
        case .background:
            for key in ["alert", "badge", "sound"] where keys.contains(key) {
                throw refuse(key, "a background push carries only content-available (no alert, badge or sound)")
            }
            guard payload.isContentAvailable else {
                throw PushRequestError(.invalidCombination, field: "payload.aps.content-available", "must be 1 in a background push")
            }
            if let key = aps.map(\.key).first(where: { $0 != "content-available" }) {
                throw refuse(key, "a background push carries only content-available")
            }
        case .liveactivity:
            guard let event = payload.json["aps"]?["event"]?.stringValue else {
                throw PushRequestError(.missingField, field: "payload.aps.event", "is required in a Live Activity push (start, update or end)")
            }
            guard keys.contains("timestamp") else {
                throw PushRequestError(.missingField, field: "payload.aps.timestamp", "is required in a Live Activity push (seconds since 1970)")
            }
            if event != "end", !keys.contains("content-state") {
                throw PushRequestError(.missingField, field: "payload.aps.content-state", "is required for event \(event)")
            }
            if event == "start" {
                for key in ["attributes-type", "attributes"] where !keys.contains(key) {
                    throw PushRequestError(.missingField, field: "payload.aps.\(key)", "is required for event start")
                }
            } else {
                // ActivityKit reads these only when it starts an activity from a push.
                for key in ["attributes-type", "attributes", "input-push-token", "input-push-channel"] where keys.contains(key) {
                    throw refuse(key, "is only for event start (got \(event))")
                }
            }
            for key in ["badge", "content-available", "mutable-content"] where keys.contains(key) {
                throw refuse(key, "is not part of a Live Activity push")
            }
        default:
            break
        }
    }

    // MARK: Fields

    private static func identifier(_ value: JSONValue?) throws(PushRequestError) -> String {
        guard let value else { throw PushRequestError(.missingField, field: "id", "is required (the request's idempotency key)") }
        guard case .string(let id) = value else {
            throw PushRequestError(.invalidField, field: "id", "must be a string, got \(value.kindDescription)")
        }
        guard !id.isEmpty, id.count <= maximumIDLength else {
            throw PushRequestError(.invalidField, field: "id", "must be 1–\(maximumIDLength) characters (got \(id.count))")
        }
        if containsControlCharacters(id) {
            throw PushRequestError(.invalidField, field: "id", "must not contain control characters")
        }
        return id
    }

    /// Whether `text` holds a control character (Unicode category Cc: U+0000–U+001F, U+007F–U+009F).
    /// Ids and collapse ids become HTTP/2 header values (`apns-collapse-id`), where CR, LF and NUL
    /// break the request.
    public static func containsControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }

    static let targetNames = "tokens, users, topic, all, activity, push_to_start, channel"

    private static func target(_ value: JSONValue?) throws(PushRequestError) -> PushTarget {
        guard let value else {
            throw PushRequestError(
                .missingField, field: "to",
                "is required: {\"tokens\": […]}, {\"users\": […]}, {\"topic\": \"…\"}, {\"all\": true}, {\"activity\": \"…\"}, {\"push_to_start\": {…}} or {\"channel\": \"…\"}"
            )
        }
        guard case .object(let members) = value else {
            throw PushRequestError(.invalidField, field: "to", "must be an object, got \(value.kindDescription)")
        }
        guard members.count == 1, let member = members.first else {
            throw PushRequestError(
                .invalidField, field: "to",
                "must name exactly one of \(targetNames) (got \(members.isEmpty ? "none" : members.map(\.key).joined(separator: ", ")))")
        }
        let field = "to.\(member.key)"
        switch member.key {
        case "tokens":
            guard case .array(let values) = member.value, !values.isEmpty else {
                throw PushRequestError(.invalidField, field: field, "must be a non-empty array of hex device tokens")
            }
            guard values.count <= maximumTokenCount else {
                throw PushRequestError(
                    .invalidField, field: field, "lists \(values.count) tokens; at most \(maximumTokenCount) (use a topic for more)")
            }
            var tokens: [DeviceToken] = []
            var seen: Set<DeviceToken> = []
            for (index, element) in values.enumerated() {
                guard case .string(let text) = element else {
                    throw PushRequestError(
                        .invalidField, field: "\(field)[\(index)]", "must be a string of hex digits, got \(element.kindDescription)")
                }
                let token: DeviceToken
                do {
                    token = try DeviceToken(normalizing: text, field: "\(field)[\(index)]")
                } catch {
                    throw PushRequestError(.invalidField, field: error.field, error.reason)
                }
                if seen.insert(token).inserted { tokens.append(token) }
            }
            return .tokens(tokens)
        case "users":
            return .users(try users(member.value, field: field))
        case "topic":
            guard case .string(let topic) = member.value, !topic.isEmpty else {
                throw PushRequestError(.invalidField, field: field, "must be a non-empty string, got \(NotificationPayload.describe(member.value))")
            }
            return .topic(topic)
        case "all":
            guard case .bool(true) = member.value else {
                throw PushRequestError(.invalidField, field: field, "must be true, got \(NotificationPayload.describe(member.value))")
            }
            return .all
        case "activity":
            if case .string = member.value { return .activity(.id(try activityField(member.value, field: field))) }
            // {"users": […], "attributes_type": "…"}: the type narrows a user's activities.
            var attributesType: String?
            var audienceValue = member.value
            if case .object(var members) = member.value, members.count == 2, let index = members.firstIndex(where: { $0.key == "attributes_type" }) {
                attributesType = try activityField(members[index].value, field: "\(field).attributes_type")
                members.remove(at: index)
                audienceValue = .object(members)
            }
            let (key, value, inner) = try audience(audienceValue, field: field, expected: ["id", "users"])
            if key == "id" {
                guard attributesType == nil else {
                    throw PushRequestError(.invalidField, field: "\(field).attributes_type", "goes with users, not with an activity id")
                }
                return .activity(.id(try activityField(value, field: inner)))
            }
            return .activity(.users(try users(value, field: inner), attributesType: attributesType))
        case "push_to_start":
            let (key, value, inner) = try audience(member.value, field: field, expected: ["users", "all"])
            if key == "users" { return .pushToStart(.users(try users(value, field: inner))) }
            guard case .bool(true) = value else {
                throw PushRequestError(.invalidField, field: inner, "must be true, got \(NotificationPayload.describe(value))")
            }
            return .pushToStart(.all)
        case "channel":
            let channel = try activityField(member.value, field: field)
            guard channel.utf8.count <= maximumActivityFieldLength, isWellFormedChannelID(channel) else {
                throw PushRequestError(
                    .invalidField, field: field,
                    "must be a channel id as APNs made it (base64, at most \(maximumActivityFieldLength) bytes), got \(PushRequestError.quoted(channel))"
                )
            }
            return .channel(channel)
        default:
            throw PushRequestError(.invalidField, field: field, "is not a target (expected one of \(targetNames))")
        }
    }

    /// A list of user ids: non-empty strings, at most ``maximumUserCount``, repeats dropped.
    private static func users(_ value: JSONValue, field: String) throws(PushRequestError) -> [String] {
        guard case .array(let values) = value, !values.isEmpty else {
            throw PushRequestError(.invalidField, field: field, "must be a non-empty array of user ids")
        }
        guard values.count <= maximumUserCount else {
            throw PushRequestError(.invalidField, field: field, "lists \(values.count) users; at most \(maximumUserCount)")
        }
        var users: [String] = []
        var seen: Set<String> = []
        for (index, element) in values.enumerated() {
            guard case .string(let user) = element, !user.isEmpty else {
                throw PushRequestError(
                    .invalidField, field: "\(field)[\(index)]", "must be a non-empty string, got \(NotificationPayload.describe(element))")
            }
            if seen.insert(user).inserted { users.append(user) }
        }
        return users
    }

    /// An activity id or channel id: 1–``maximumActivityFieldLength`` characters without spaces or
    /// control characters, the rule registrations follow (``ActivityTokenRegistration/name(_:field:)``),
    /// so an id no token can have is refused rather than finishing with nobody reached.
    private static func activityField(_ value: JSONValue, field: String) throws(PushRequestError) -> String {
        guard case .string(let text) = value, !text.isEmpty else {
            throw PushRequestError(.invalidField, field: field, "must be a non-empty string, got \(NotificationPayload.describe(value))")
        }
        do {
            return try ActivityTokenRegistration.name(text, field: field)
        } catch {
            throw PushRequestError(.invalidField, field: field, error.reason)
        }
    }

    /// The one member of an audience object (`{"users": […]}`), checked against `expected`.
    private static func audience(
        _ value: JSONValue, field: String, expected: [String]
    ) throws(PushRequestError) -> (key: String, value: JSONValue, field: String) {
        let shapes = expected.map { "{\"\($0)\": …}" }.joined(separator: " or ")
        guard case .object(let members) = value else {
            throw PushRequestError(.invalidField, field: field, "must be \(shapes), got \(value.kindDescription)")
        }
        guard members.count == 1, let member = members.first, expected.contains(member.key) else {
            throw PushRequestError(
                .invalidField, field: field,
                "must name exactly one of \(expected.joined(separator: ", ")) (got \(members.isEmpty ? "none" : members.map(\.key).joined(separator: ", ")))"
            )
        }
        return (member.key, member.value, "\(field).\(member.key)")
    }
}
