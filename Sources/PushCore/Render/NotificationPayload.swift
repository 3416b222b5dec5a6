/// The `payload` of a push request: an APNs payload exactly as Apple documents it, checked key by
/// key and kept as given (key order, number text) so what goes to APNs is what the publisher wrote,
/// minus what rendering changes (device settings, server-side localisation, truncation).
///
/// Checks (each failure names the field, e.g. `payload.aps.sound.volume`):
/// - the payload is an object; `aps`, when present, is an object; every other top-level key is a
///   custom key with any JSON value;
/// - every `aps` key is one Apple documents, with the documented type (``apsKeys``); unknown keys are
///   refused, so a typo (`content_available`) cannot silently turn into a different notification;
/// - `alert` is a string or a dictionary of the documented keys; `*-loc-args` are arrays of strings
///   and need their `*-loc-key`;
/// - `sound` is a name or the critical-alert dictionary (`critical` 0 or 1, `name`, `volume` 0–1).
///
/// Rules that depend on the push type are in ``PushRequest``.
public struct NotificationPayload: Sendable, Equatable {
    /// The payload object as given.
    public let json: JSONValue

    /// The `aps` keys Apple documents, in the order of its documentation.
    public static let apsKeys: [String] = [
        "alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content",
        "target-content-id", "interruption-level", "relevance-score", "filter-criteria",
        // Live Activities
        "timestamp", "event", "content-state", "stale-date", "dismissal-date", "attributes-type", "attributes",
        "input-push-token", "input-push-channel",
        // Widget and control pushes
        "content-changed",
    ]

    /// The `aps` keys that only Live Activity pushes carry.
    public static let liveActivityKeys: Set<String> = [
        "timestamp", "event", "content-state", "stale-date", "dismissal-date", "attributes-type", "attributes",
        "input-push-token", "input-push-channel",
    ]

    /// The keys of an `alert` dictionary.
    public static let alertKeys: [String] = [
        "title", "subtitle", "body", "launch-image", "title-loc-key", "title-loc-args", "subtitle-loc-key",
        "subtitle-loc-args", "loc-key", "loc-args", "action-loc-key", "summary-arg", "summary-arg-count",
        // Live Activity alerts carry their sound inside the alert.
        "sound",
    ]

    /// Checks `json` (see the rules above); `field` is the path used in errors.
    public init(validating json: JSONValue, field: String = "payload") throws(PushRequestError) {
        guard case .object(let members) = json else {
            throw PushRequestError(.invalidField, field: field, "must be an object (an APNs payload: {\"aps\": {…}, …}), got \(json.kindDescription)")
        }
        for member in members where member.key == "aps" {
            try Self.validateAPS(member.value, field: "\(field).aps")
        }
        self.json = json
    }

    /// The `aps` members, empty when there is no `aps`.
    public var aps: [(key: String, value: JSONValue)] {
        guard case .object(let members) = json["aps"] ?? .object([]) else { return [] }
        return members
    }

    /// The custom (non-`aps`) top-level members.
    public var customMembers: [(key: String, value: JSONValue)] {
        guard case .object(let members) = json else { return [] }
        return members.filter { $0.key != "aps" }
    }

    public var hasAlert: Bool { json["aps"]?["alert"] != nil }
    public var hasBadge: Bool { json["aps"]?["badge"] != nil }
    public var hasSound: Bool { json["aps"]?["sound"] != nil }
    /// `content-available` is 1.
    public var isContentAvailable: Bool { json["aps"]?["content-available"]?.int64Value == 1 }
    /// The Live Activity keys present in `aps`, in payload order.
    public var presentLiveActivityKeys: [String] { aps.map(\.key).filter { Self.liveActivityKeys.contains($0) } }

    // MARK: aps

    private static func validateAPS(_ value: JSONValue, field: String) throws(PushRequestError) {
        guard case .object(let members) = value else {
            throw PushRequestError(.invalidField, field: field, "must be an object, got \(value.kindDescription)")
        }
        for (key, value) in members {
            let path = "\(field).\(key)"
            switch key {
            case "alert": try validateAlert(value, field: path)
            case "badge": try requireInteger(value, field: path, in: 0...Int64(Int32.max))
            case "sound": try validateSound(value, field: path)
            case "thread-id", "category", "target-content-id", "filter-criteria", "attributes-type", "input-push-channel":
                try requireString(value, field: path, nonEmpty: true)
            case "content-available", "mutable-content":
                guard let number = value.int64Value, number == 0 || number == 1 else {
                    throw PushRequestError(.invalidField, field: path, "must be the number 1 (or 0), got \(describe(value))")
                }
            case "input-push-token":
                guard value.int64Value == 1 else {
                    throw PushRequestError(.invalidField, field: path, "must be the number 1, got \(describe(value))")
                }
            case "interruption-level":
                let levels = ["passive", "active", "time-sensitive", "critical"]
                guard let level = value.stringValue, levels.contains(level) else {
                    throw PushRequestError(.invalidField, field: path, "must be one of \(levels.joined(separator: ", ")), got \(describe(value))")
                }
            case "relevance-score":
                guard let score = value.doubleValue, score.isFinite, score >= 0 else {
                    throw PushRequestError(.invalidField, field: path, "must be a number ≥ 0, got \(describe(value))")
                }
            case "timestamp", "stale-date", "dismissal-date":
                try requireInteger(value, field: path, in: 0...Int64.max, what: "seconds since 1970")
            case "event":
                let events = ["start", "update", "end"]
                guard let event = value.stringValue, events.contains(event) else {
                    throw PushRequestError(.invalidField, field: path, "must be one of \(events.joined(separator: ", ")), got \(describe(value))")
                }
            case "content-state", "attributes":
                guard case .object = value else {
                    throw PushRequestError(.invalidField, field: path, "must be an object, got \(value.kindDescription)")
                }
            case "content-changed":
                guard case .bool = value else {
                    throw PushRequestError(.invalidField, field: path, "must be true or false, got \(describe(value))")
                }
            default:
                throw PushRequestError(
                    .invalidField, field: path, "is not an aps key Apple documents (custom keys belong next to aps, not inside it)")
            }
        }
    }

    private static func validateAlert(_ value: JSONValue, field: String) throws(PushRequestError) {
        switch value {
        case .string: return
        case .object(let members):
            let keys = Set(members.map(\.key))
            for (key, value) in members {
                let path = "\(field).\(key)"
                switch key {
                case "title", "body":
                    if case .object = value {
                        try validateLocalizedText(value, field: path)
                    } else {
                        try requireString(value, field: path, nonEmpty: false)
                    }
                case "subtitle", "launch-image", "summary-arg", "sound":
                    try requireString(value, field: path, nonEmpty: false)
                case "title-loc-key", "subtitle-loc-key", "loc-key":
                    try requireString(value, field: path, nonEmpty: true)
                case "title-loc-args", "subtitle-loc-args", "loc-args":
                    try requireStringArray(value, field: path)
                    let keyName = String(key.dropLast("args".count)) + "key"
                    guard keys.contains(keyName) else {
                        throw PushRequestError(.invalidCombination, field: path, "needs \(keyName) in the same alert")
                    }
                case "action-loc-key":
                    if case .null = value { continue }
                    try requireString(value, field: path, nonEmpty: true)
                case "summary-arg-count":
                    try requireInteger(value, field: path, in: 0...Int64(Int32.max))
                default:
                    throw PushRequestError(
                        .invalidField, field: path,
                        "is not an alert key Apple documents (\(alertKeys.joined(separator: ", ")))")
                }
            }
        default:
            throw PushRequestError(.invalidField, field: field, "must be a string or an object, got \(value.kindDescription)")
        }
    }

    /// The Live Activity form of an alert `title`/`body`: `{"loc-key": "…", "loc-args": ["…"]}`.
    private static func validateLocalizedText(_ value: JSONValue, field: String) throws(PushRequestError) {
        guard case .object(let members) = value else { return }
        guard members.contains(where: { $0.key == "loc-key" }) else {
            throw PushRequestError(.missingField, field: "\(field).loc-key", "is required when \(field) is an object")
        }
        for (key, value) in members {
            switch key {
            case "loc-key": try requireString(value, field: "\(field).loc-key", nonEmpty: true)
            case "loc-args": try requireStringArray(value, field: "\(field).loc-args")
            default: throw PushRequestError(.invalidField, field: "\(field).\(key)", "is not allowed (only loc-key and loc-args)")
            }
        }
    }

    private static func validateSound(_ value: JSONValue, field: String) throws(PushRequestError) {
        switch value {
        case .string(let name):
            if name.isEmpty { throw PushRequestError(.invalidField, field: field, "must not be empty (use \"default\" for the system sound)") }
        case .object(let members):
            guard members.contains(where: { $0.key == "name" }) else {
                throw PushRequestError(.missingField, field: "\(field).name", "is required in a critical-alert sound")
            }
            for (key, value) in members {
                let path = "\(field).\(key)"
                switch key {
                case "critical":
                    guard let flag = value.int64Value, flag == 0 || flag == 1 else {
                        throw PushRequestError(.invalidField, field: path, "must be the number 1 (or 0), got \(describe(value))")
                    }
                case "name": try requireString(value, field: path, nonEmpty: true)
                case "volume":
                    guard let volume = value.doubleValue, volume >= 0, volume <= 1 else {
                        throw PushRequestError(.invalidField, field: path, "must be a number from 0 to 1, got \(describe(value))")
                    }
                default:
                    throw PushRequestError(.invalidField, field: path, "is not a sound key Apple documents (critical, name, volume)")
                }
            }
        default:
            throw PushRequestError(
                .invalidField, field: field, "must be a sound name or a {critical, name, volume} object, got \(value.kindDescription)")
        }
    }

    // MARK: Helpers

    private static func requireString(_ value: JSONValue, field: String, nonEmpty: Bool) throws(PushRequestError) {
        guard case .string(let text) = value else {
            throw PushRequestError(.invalidField, field: field, "must be a string, got \(value.kindDescription)")
        }
        if nonEmpty, text.isEmpty { throw PushRequestError(.invalidField, field: field, "must not be empty") }
    }

    private static func requireStringArray(_ value: JSONValue, field: String) throws(PushRequestError) {
        guard case .array(let values) = value else {
            throw PushRequestError(.invalidField, field: field, "must be an array of strings, got \(value.kindDescription)")
        }
        for (index, element) in values.enumerated() {
            guard case .string = element else {
                throw PushRequestError(.invalidField, field: "\(field)[\(index)]", "must be a string, got \(describe(element))")
            }
        }
    }

    private static func requireInteger(
        _ value: JSONValue, field: String, in range: ClosedRange<Int64>, what: String = "a whole number"
    ) throws(PushRequestError) {
        guard let number = value.int64Value, range.contains(number) else {
            throw PushRequestError(.invalidField, field: field, "must be \(what) ≥ \(range.lowerBound), got \(describe(value))")
        }
    }

    /// `a string`, or the number itself (`1.5`), for messages.
    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .number(let text): text
        case .bool(let flag): flag ? "true" : "false"
        case .string(let text): PushRequestError.quoted(text)
        default: value.kindDescription
        }
    }
}
