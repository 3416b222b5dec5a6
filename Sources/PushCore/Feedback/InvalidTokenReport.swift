import Foundation

/// One token to remove under CONTRACT.md's invalid-token rule: removed only if it was not registered
/// again after ``invalidSince``. Made from a ``FeedbackEvent`` (`push.feedback`), a legacy feedback
/// record (`pushctl feedback import`) or the stale-token sweep.
///
/// Pure: push-feedback does the I/O.
public struct InvalidTokenReport: Sendable, Hashable {
    /// The app's bundle id.
    public var app: String
    public var token: DeviceToken
    /// APNs' reason (one of ``apnsReasons``) or ``staleReason``; the `reason` of `token.removed`.
    public var reason: String
    /// The moment the token is known to have been invalid (ms since 1970): a registration after it
    /// keeps the token.
    public var invalidSince: Int64

    public init(app: String, token: DeviceToken, reason: String, invalidSince: Int64) {
        self.app = app
        self.token = token
        self.reason = reason
        self.invalidSince = invalidSince
    }

    /// The APNs reasons that make a token dead. Anything else in an event is refused rather than
    /// acted on: a token removed by mistake is a device that silently stops getting notifications.
    public static let apnsReasons: Set<String> = ["Unregistered", "ExpiredToken", "BadDeviceToken", "DeviceTokenNotForTopic"]
    /// The reason of tokens the stale sweep removes: not registered again for the configured days.
    public static let staleReason = "Stale"
    /// The reason of tokens from the legacy feedback service: what APNs now answers `410 Unregistered`.
    public static let legacyFeedbackReason = "Unregistered"

    /// Checks `event`: a non-empty `app`, a token that normalises (``DeviceToken``), a reason of
    /// ``apnsReasons``, and times that are ms since 1970 (not negative).
    ///
    /// - Throws: ``FeedbackError`` naming the field.
    public init(event: FeedbackEvent) throws(FeedbackError) {
        guard !event.app.isEmpty else {
            throw FeedbackError(.invalidField, field: "app", "must be the app's bundle id, not empty")
        }
        let token: DeviceToken
        do {
            token = try DeviceToken(normalizing: event.token)
        } catch {
            throw FeedbackError(.invalidField, field: "token", error.reason)
        }
        guard Self.apnsReasons.contains(event.reason) else {
            throw FeedbackError(
                .invalidField,
                field: "reason",
                "must be one of \(Self.apnsReasons.sorted().joined(separator: ", ")) (got \(Self.quoted(event.reason)))"
            )
        }
        if let timestamp = event.timestamp, timestamp < 0 {
            throw FeedbackError(.invalidField, field: "timestamp", "must be ms since 1970 (got \(timestamp))")
        }
        guard event.reportedAt >= 0 else {
            throw FeedbackError(.invalidField, field: "reported_at", "must be ms since 1970 (got \(event.reportedAt))")
        }
        self.init(app: event.app, token: token, reason: event.reason, invalidSince: event.invalidSince)
    }

    /// Decodes and checks a `push.feedback` body (``FeedbackEvent`` JSON).
    ///
    /// - Throws: ``FeedbackError`` naming the field: `body` when it is not a JSON object, else the
    ///   missing or malformed field (`app`, `token`, `reason`, `timestamp`, `reported_at`).
    public init(feedbackBody body: [UInt8]) throws(FeedbackError) {
        // The common case read quickly (feedback arrives by the ten thousand); anything else, errors
        // included, is JSONDecoder's to judge.
        if let event = Self.quickEvent(body) {
            try self.init(event: event)
            return
        }
        let event: FeedbackEvent
        do {
            event = try JSONDecoder().decode(FeedbackEvent.self, from: Data(body))
        } catch let error as DecodingError {
            throw Self.describe(error, body: body)
        } catch {
            throw FeedbackError(.invalidJSON, field: "body", "is not a feedback event: \(error)")
        }
        try self.init(event: event)
    }

    private static func describe(_ error: DecodingError, body: [UInt8]) -> FeedbackError {
        func field(_ path: [any CodingKey], _ last: (any CodingKey)? = nil) -> String {
            let keys = path + (last.map { [$0] } ?? [])
            return keys.isEmpty ? "body" : keys.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return FeedbackError(.missingField, field: field(context.codingPath, key), "is required")
        case .valueNotFound(_, let context):
            return FeedbackError(.invalidField, field: field(context.codingPath), "must not be null")
        case .typeMismatch(let type, let context):
            if context.codingPath.isEmpty {
                return FeedbackError(.invalidJSON, field: "body", "must be a JSON object (a feedback event)")
            }
            let expected = type == String.self ? "a string" : (type == Int64.self ? "a whole number (ms since 1970)" : "\(type)")
            return FeedbackError(.invalidField, field: field(context.codingPath), "must be \(expected)")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return diagnoseCorruption(body)
            }
            return FeedbackError(.invalidField, field: field(context.codingPath), "is malformed: \(context.debugDescription)")
        @unknown default:
            return FeedbackError(.invalidJSON, field: "body", "is not a feedback event: \(error)")
        }
    }

    /// The event when `body` is a JSON object whose fields have exactly the types JSONDecoder wants
    /// (unknown fields are ignored, as JSONDecoder does); nil for anything else.
    static func quickEvent(_ body: [UInt8]) -> FeedbackEvent? {
        guard let object = JSONObjectReader.object(body, integers: true),
            let app = object["app"] as? String, let token = object["token"] as? String, let reason = object["reason"] as? String,
            let reportedAt = object["reported_at"] as? Int64
        else { return nil }
        let timestamp: Int64?
        switch object["timestamp"] {
        case nil, is NSNull: timestamp = nil
        case let value as Int64: timestamp = value
        default: return nil
        }
        return FeedbackEvent(app: app, token: token, reason: reason, timestamp: timestamp, reportedAt: reportedAt)
    }

    /// JSONDecoder reports a number that does not fit its field (`1.5`, `1e30` for an Int64) as
    /// corrupt data without naming the field; find the field, or say the body is not JSON.
    private static func diagnoseCorruption(_ body: [UInt8]) -> FeedbackError {
        guard let value = try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) else {
            return FeedbackError(.invalidJSON, field: "body", "is not valid JSON")
        }
        guard let object = value as? [String: Any] else {
            return FeedbackError(.invalidJSON, field: "body", "must be a JSON object (a feedback event)")
        }
        for field in ["timestamp", "reported_at"] {
            if let number = object[field] as? NSNumber,
                Int64(exactly: number.doubleValue) == nil || number.doubleValue.rounded() != number.doubleValue
            {
                return FeedbackError(.invalidField, field: field, "must be a whole number (ms since 1970), got \(number)")
            }
        }
        return FeedbackError(.invalidJSON, field: "body", "is not a feedback event")
    }

    static func quoted(_ text: String) -> String {
        "\"\(text.count > 64 ? String(text.prefix(64)) + "…" : text)\""
    }
}
