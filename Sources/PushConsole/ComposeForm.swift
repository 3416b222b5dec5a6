import Foundation
public import Logging
public import PushCore

/// The console's compose form as a push request (CONTRACT.md, "Push request v1"). Pure: the fields
/// in, the request's JSON out, or an error naming the field. Whether the request is valid is then
/// decided by the same code push-render uses (``PushCore/PushRequest``, ``PushCore/NotificationRenderer``).
public struct ComposeForm: Sendable, Equatable {
    public var fields: [String: String]

    public init(fields: [String: String]) {
        self.fields = fields
    }

    /// The field names the form has (the console's compose page).
    public static let fieldNames = [
        "app", "target_kind", "target", "request_id", "title", "body", "title_loc_key", "loc_key", "loc_args", "badge", "sound", "payload_json",
        "localize", "push_type", "priority", "collapse_id", "expiration",
    ]

    public static let targetKinds = ["tokens", "users", "topic", "channel", "all"]

    private func value(_ name: String) -> String {
        (fields[name] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Comma- or whitespace-separated items, empty ones dropped.
    static func list(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == "," || $0.isWhitespace }).map(String.init)
    }

    /// The push request's JSON (keys sorted), with `request_id` or, when it is empty, `generatedID`.
    ///
    /// - Throws: ``ConsoleError`` (`400`) naming the form field.
    public func requestJSON(generatedID: String) throws(ConsoleError) -> [UInt8] {
        var request: [String: Any] = [:]
        let id = value("request_id")
        request["id"] = id.isEmpty ? generatedID : id
        let app = value("app")
        guard !app.isEmpty else { throw ConsoleError(field: "app", "choose an app") }
        request["app"] = app

        let kind = value("target_kind")
        let target = value("target")
        switch kind {
        case "tokens", "users":
            let items = Self.list(target)
            guard !items.isEmpty else {
                throw ConsoleError(field: "target", "give at least one \(kind == "tokens" ? "token" : "user"), comma-separated")
            }
            request["to"] = [kind: items]
        case "topic", "channel":
            guard !target.isEmpty else { throw ConsoleError(field: "target", "give the \(kind == "topic" ? "topic's name" : "channel id")") }
            request["to"] = [kind: target]
        case "all":
            request["to"] = ["all": true]
        default:
            throw ConsoleError(field: "target_kind", "must be one of \(Self.targetKinds.joined(separator: ", "))")
        }

        let raw = value("payload_json")
        if !raw.isEmpty {
            guard let payload = try? JSONSerialization.jsonObject(with: Data(raw.utf8)), payload is [String: Any] else {
                throw ConsoleError(field: "payload_json", "must be a JSON object (the APNs payload: {\"aps\": {…}, …})")
            }
            request["payload"] = payload
        } else {
            request["payload"] = try formPayload()
        }

        let localize = value("localize")
        if !localize.isEmpty {
            guard LocalizationMode(rawValue: localize) != nil else { throw ConsoleError(field: "localize", "must be device or server") }
            request["localize"] = localize
        }
        if !value("push_type").isEmpty { request["push_type"] = value("push_type") }
        if !value("priority").isEmpty {
            guard let priority = Int(value("priority")) else { throw ConsoleError(field: "priority", "must be 10, 5 or 1") }
            request["priority"] = priority
        }
        if !value("collapse_id").isEmpty { request["collapse_id"] = value("collapse_id") }
        if !value("expiration").isEmpty {
            guard let expiration = Int64(value("expiration")) else {
                throw ConsoleError(field: "expiration", "must be a whole number of seconds since 1970 (0: try once)")
            }
            request["expiration"] = expiration
        }
        // Only strings, numbers, booleans, arrays and objects from JSON: serialising cannot fail.
        let data = (try? JSONSerialization.data(withJSONObject: request, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return Array(data)
    }

    /// `aps` from the title, body, keys, badge and sound fields.
    private func formPayload() throws(ConsoleError) -> [String: Any] {
        var alert: [String: Any] = [:]
        if !value("title").isEmpty { alert["title"] = value("title") }
        if !value("body").isEmpty { alert["body"] = value("body") }
        if !value("title_loc_key").isEmpty { alert["title-loc-key"] = value("title_loc_key") }
        if !value("loc_key").isEmpty { alert["loc-key"] = value("loc_key") }
        let arguments = value("loc_args").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if !value("loc_args").isEmpty {
            guard !value("loc_key").isEmpty else { throw ConsoleError(field: "loc_args", "need a loc key") }
            alert["loc-args"] = arguments
        }
        var aps: [String: Any] = [:]
        if !alert.isEmpty { aps["alert"] = alert }
        if !value("badge").isEmpty {
            guard let badge = Int(value("badge")), badge >= 0 else { throw ConsoleError(field: "badge", "must be a whole number ≥ 0") }
            aps["badge"] = badge
        }
        if !value("sound").isEmpty { aps["sound"] = value("sound") }
        guard !aps.isEmpty else {
            throw ConsoleError(field: "payload", "give a title, a body, a loc key, a badge or a sound, or the raw JSON payload")
        }
        return ["aps": aps]
    }

    /// A request id for a form that gave none: `console-<UTC time>-<8 hex digits>`.
    public static func generatedID(now: Int64, random: UInt32) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        let hex = String(random, radix: 16)
        return
            "console-\(formatter.string(from: Date(timeIntervalSince1970: Double(now) / 1000)))-\(String(repeating: "0", count: 8 - hex.count))\(hex)"
    }
}

/// What the console tells its user: an HTTP status, the field at fault (if one is), and the message.
public struct ConsoleError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: Int
    public var code: String
    public var field: String?
    public var message: String

    public init(status: Int = 400, code: String = "invalid_request", field: String? = nil, _ message: String) {
        self.status = status
        self.code = code
        self.field = field
        self.message = message
    }

    public var description: String { field.map { "\($0): \(message)" } ?? message }

    /// `what` cannot be reached. The cause (an address, the server's words) goes to the console's log,
    /// never to the client: whoever sends a cookie or a request must not learn where Redis or the
    /// broker listens.
    public static func unavailable(_ what: String, _ error: any Error, logger: Logger) -> ConsoleError {
        logger.error("console: \(what) is unavailable", metadata: ["push.error": "\(error)"])
        return ConsoleError(status: 503, code: "unavailable", "\(what) is unavailable; try again shortly (the console's log says why)")
    }
}
