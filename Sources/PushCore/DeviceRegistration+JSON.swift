import Foundation

/// Decoding the registration body of CONTRACT.md ("Registration HTTP API"): the JSON of
/// `PUT /v1/apps/{app}/devices/{token}`, also the core of a `push.registrations` message.
///
/// ```json
/// {"user": "alice", "locale": "zh-Hant-TW", "environment": "production", "topics": ["news"],
///  "device": {"uuid": "…", "name": "…", "model": "…", "os_version": "…", "app_version": "…"},
///  "settings": {"alert": true, "badge": true, "sound": false}}
/// ```
///
/// Rules (each broken rule is a ``RegistrationError`` whose `field` is the path, e.g. `settings.alert`):
/// - every field is optional, and `null` means the same as leaving the field out, so the newest
///   registration replaces the stored one whole (see ``DeviceRegistration``);
/// - unknown fields are **rejected**, at the top level and inside `device` and `settings`, so a typo
///   (`"setings"`) cannot silently register a device with the defaults;
/// - `user`: a non-empty string of at most ``maximumUserLength`` characters without control characters
///   (it becomes part of a Redis key and of log lines);
/// - `locale`: 1–``maximumLocaleLength`` ASCII letters, digits, `-` and `_` (BCP 47 or Apple's
///   `zh_Hant_TW` spelling; finer checks would turn away locales that server-side catalogs simply lack);
/// - `environment`: `"production"` or `"sandbox"`;
/// - `topics`: at most ``maximumTopicCount`` non-empty strings of at most ``maximumTopicLength``
///   characters without whitespace or control characters; repeats are dropped, first one kept;
/// - `device.*`: strings of at most ``maximumDeviceFieldLength`` characters;
/// - `settings.*`: `true` or `false` (a `1` or `"yes"` is refused: clients that send those are buggy
///   and should hear about it); a setting left out is enabled.
extension DeviceRegistration {
    /// The top-level fields a registration body may hold.
    public static let fieldNames: Set<String> = ["user", "locale", "environment", "topics", "device", "settings"]
    public static let maximumUserLength = 256
    public static let maximumLocaleLength = 35
    public static let maximumTopicCount = 100
    public static let maximumTopicLength = 128
    public static let maximumDeviceFieldLength = 256

    /// Parses a request or message body into a JSON object, without interpreting its fields.
    ///
    /// Strict, like every JSON reader of this package (``JSONValue/parse(_:maximumDepth:)``): UTF-8
    /// only (no byte order mark, no UTF-16), no repeated key (two `token`s in one message would leave
    /// it to the reader which one counts), at most 64 levels. Numbers keep their value as far as it
    /// goes (an `Int64`, else a `Double`, `inf` past its range), so a field check names the field of
    /// a number like `1e400` instead of calling the body malformed.
    ///
    /// - Throws: ``RegistrationError/Code/invalidJSON`` with field `body` when the bytes are not JSON
    ///   or the top level is not an object.
    public static func decode(body: [UInt8]) throws(RegistrationError) -> [String: Any] {
        // Every registration goes through here: read the common shape quickly, and leave anything
        // else (numbers, errors) to the strict parser.
        if let object = JSONObjectReader.object(body) {
            return object
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch {
            throw RegistrationError(.invalidJSON, field: "body", "is not valid JSON (\(error))")
        }
        guard case .object = value, let object = value.foundationValue as? [String: Any] else {
            throw RegistrationError(.invalidJSON, field: "body", "must be a JSON object, got \(value.kindDescription)")
        }
        return object
    }

    /// Decodes and checks a registration body already parsed into a JSON object (see the rules above).
    ///
    /// Accepts the values `JSONSerialization` produces and plain Swift values (`String`, `Bool`,
    /// `[Any]`, `[String: Any]`, `NSNull`), so tests and the legacy forms can build bodies in code.
    public init(json: [String: Any]) throws(RegistrationError) {
        for key in json.keys.sorted() where !Self.fieldNames.contains(key) {
            throw RegistrationError(
                .invalidField, field: key, "is not a registration field (expected one of \(Self.fieldNames.sorted().joined(separator: ", ")))")
        }
        self.init()
        user = try Self.user(json["user"])
        locale = try Self.locale(json["locale"])
        if let name = try Self.optionalString(json["environment"], field: "environment") {
            guard let environment = AppConfiguration.Environment(rawValue: name) else {
                throw RegistrationError(.invalidField, field: "environment", "must be \"production\" or \"sandbox\", got \(Self.quoted(name))")
            }
            self.environment = environment
        }
        topics = try Self.topics(json["topics"])
        device = try Self.device(json["device"])
        settings = try Self.settings(json["settings"])
    }

    // MARK: Fields

    static func user(_ value: Any?) throws(RegistrationError) -> String? {
        guard let user = try optionalString(value, field: "user") else { return nil }
        if user.isEmpty {
            throw RegistrationError(.invalidField, field: "user", "must not be empty (leave it out for a device without a user)")
        }
        if user.count > maximumUserLength {
            throw RegistrationError(.invalidField, field: "user", "must be at most \(maximumUserLength) characters (got \(user.count))")
        }
        if user.unicodeScalars.contains(where: isControl) {
            throw RegistrationError(.invalidField, field: "user", "must not contain control characters")
        }
        return user
    }

    static func locale(_ value: Any?) throws(RegistrationError) -> String? {
        guard let locale = try optionalString(value, field: "locale") else { return nil }
        let valid =
            !locale.isEmpty && locale.unicodeScalars.count <= maximumLocaleLength
            && locale.unicodeScalars.allSatisfy { scalar in
                ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "_"
            }
        if !valid {
            throw RegistrationError(
                .invalidField,
                field: "locale",
                "must be 1–\(maximumLocaleLength) letters, digits, '-' or '_' such as \"zh-Hant-TW\", got \(quoted(locale))"
            )
        }
        return locale
    }

    private static func topics(_ value: Any?) throws(RegistrationError) -> [String] {
        guard let value, !(value is NSNull) else { return [] }
        guard let array = value as? [Any] else {
            throw RegistrationError(.invalidField, field: "topics", "must be an array of strings, got \(JSONKind.of(value))")
        }
        if array.count > maximumTopicCount {
            throw RegistrationError(.invalidField, field: "topics", "must hold at most \(maximumTopicCount) topics (got \(array.count))")
        }
        var topics: [String] = []
        var seen: Set<String> = []
        for (index, element) in array.enumerated() {
            let field = "topics[\(index)]"
            guard let topic = string(element) else {
                throw RegistrationError(.invalidField, field: field, "must be a string, got \(JSONKind.of(element))")
            }
            if topic.isEmpty {
                throw RegistrationError(.invalidField, field: field, "must not be empty")
            }
            if topic.count > maximumTopicLength {
                throw RegistrationError(.invalidField, field: field, "must be at most \(maximumTopicLength) characters (got \(topic.count))")
            }
            if topic.unicodeScalars.contains(where: { isControl($0) || isWhitespace($0) }) {
                throw RegistrationError(.invalidField, field: field, "must not contain whitespace or control characters, got \(quoted(topic))")
            }
            if seen.insert(topic).inserted { topics.append(topic) }
        }
        return topics
    }

    private static func device(_ value: Any?) throws(RegistrationError) -> DeviceInfo {
        guard let object = try optionalObject(value, field: "device") else { return DeviceInfo() }
        let allowed: Set<String> = ["uuid", "name", "model", "os_version", "app_version"]
        for key in object.keys.sorted() where !allowed.contains(key) {
            throw RegistrationError(
                .invalidField, field: "device.\(key)", "is not a device field (expected one of \(allowed.sorted().joined(separator: ", ")))")
        }
        func field(_ key: String) throws(RegistrationError) -> String? {
            let path = "device.\(key)"
            guard let text = try optionalString(object[key], field: path) else { return nil }
            if text.count > maximumDeviceFieldLength {
                throw RegistrationError(.invalidField, field: path, "must be at most \(maximumDeviceFieldLength) characters (got \(text.count))")
            }
            // Stored and shown to operators (the console, pushctl): no escape sequences or line breaks.
            if text.unicodeScalars.contains(where: isControl) {
                throw RegistrationError(.invalidField, field: path, "must not contain control characters")
            }
            return text
        }
        return DeviceInfo(
            uuid: try field("uuid"),
            name: try field("name"),
            model: try field("model"),
            osVersion: try field("os_version"),
            appVersion: try field("app_version")
        )
    }

    private static func settings(_ value: Any?) throws(RegistrationError) -> NotificationSettings {
        guard let object = try optionalObject(value, field: "settings") else { return NotificationSettings() }
        let allowed: Set<String> = ["alert", "badge", "sound"]
        for key in object.keys.sorted() where !allowed.contains(key) {
            throw RegistrationError(.invalidField, field: "settings.\(key)", "is not a setting (expected alert, badge or sound)")
        }
        func flag(_ key: String) throws(RegistrationError) -> Bool {
            guard let value = object[key], !(value is NSNull) else { return true }
            guard let flag = JSONKind.boolean(value) else {
                throw RegistrationError(.invalidField, field: "settings.\(key)", "must be true or false, got \(JSONKind.of(value))")
            }
            return flag
        }
        return NotificationSettings(alert: try flag("alert"), badge: try flag("badge"), sound: try flag("sound"))
    }

    // MARK: Values

    /// Unicode's control characters (general category Cc): exactly U+0000–U+001F and U+007F–U+009F,
    /// so no property lookup is needed.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// Unicode's White_Space property, answered without a lookup for ASCII (tab to carriage return,
    /// and space).
    private static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII { return (0x09...0x0D).contains(scalar.value) || scalar.value == 0x20 }
        return scalar.properties.isWhitespace
    }

    /// A string, or nil for a missing or `null` field; anything else is an error naming `field`.
    static func optionalString(_ value: Any?, field: String) throws(RegistrationError) -> String? {
        guard let value, !(value is NSNull) else { return nil }
        guard let text = string(value) else {
            throw RegistrationError(.invalidField, field: field, "must be a string, got \(JSONKind.of(value))")
        }
        return text
    }

    private static func optionalObject(_ value: Any?, field: String) throws(RegistrationError) -> [String: Any]? {
        guard let value, !(value is NSNull) else { return nil }
        guard let object = value as? [String: Any] else {
            throw RegistrationError(.invalidField, field: field, "must be an object, got \(JSONKind.of(value))")
        }
        return object
    }

    /// Strings only: `NSNumber`s would bridge to nothing here, but be explicit so a number never
    /// becomes text.
    private static func string(_ value: Any) -> String? {
        if value is NSNumber { return nil }
        return value as? String
    }

    /// `"text"`, shortened to 64 characters, for messages.
    static func quoted(_ text: String) -> String {
        let shown = text.count > 64 ? String(text.prefix(64)) + "…" : text
        return "\"\(shown.unicodeScalars.map { $0.escaped(asASCII: false) }.joined())\""
    }
}

/// Telling JSON value kinds apart in `[String: Any]` trees, where Foundation blurs them: on Linux
/// `JSONSerialization` gives `true` and `1` both as `NSNumber`, and `1 as? Bool` succeeds.
enum JSONKind {
    /// The class `JSONSerialization` uses for `true`/`false` (`__NSCFBoolean`), and what a Swift
    /// `Bool` bridges to.
    private static let booleanType: NSNumber.Type = type(of: NSNumber(value: true))

    /// A real JSON boolean (a Swift `Bool` or a boolean `NSNumber`), never a number.
    static func boolean(_ value: Any) -> Bool? {
        if let number = value as? NSNumber {
            guard type(of: number) == booleanType else { return nil }
            return number.boolValue
        }
        return value as? Bool
    }

    /// "a string", "a number", … for messages.
    static func of(_ value: Any) -> String {
        if value is NSNull { return "null" }
        if boolean(value) != nil { return "a boolean" }
        if value is NSNumber || value is Int || value is Int64 || value is Double { return "a number" }
        if value is String { return "a string" }
        if value is [Any] { return "an array" }
        if value is [String: Any] { return "an object" }
        return "an unsupported value"
    }
}

extension DeviceRegistration {
    /// A JSON whole number from a decoded body (not a boolean, not a fraction), e.g. a time in ms.
    public static func wholeNumber(_ value: Any) -> Int64? {
        if JSONKind.boolean(value) != nil { return nil }
        if let number = value as? Int64 { return number }
        if let number = value as? Int { return Int64(number) }
        if let number = value as? Double { return Int64(exactly: number) }
        if let number = value as? NSNumber {
            let whole = number.int64Value
            return Double(whole) == number.doubleValue ? whole : nil
        }
        return nil
    }
}

extension JSONValue {
    /// The value in the shape the registration checks read (`String`, `Bool`, `NSNull`, `[Any]`,
    /// `[String: Any]`); a number is an `Int64` when it is a whole number that fits, else a `Double`
    /// (`inf` for one past `Double`'s range).
    var foundationValue: Any {
        switch self {
        case .null: NSNull()
        case .bool(let flag): flag
        case .number(let text): Int64(text).map { $0 as Any } ?? (Double(text) ?? .nan) as Any
        case .string(let text): text
        case .array(let values): values.map(\.foundationValue)
        case .object(let members): Dictionary(members.map { ($0.key, $0.value.foundationValue) }, uniquingKeysWith: { first, _ in first })
        }
    }
}
