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
    /// The push request whose send found the token invalid (its report counts the removal); nil for
    /// the sweep, legacy imports and events from older senders.
    public var requestID: String?

    public init(app: String, token: DeviceToken, reason: String, invalidSince: Int64, requestID: String? = nil) {
        self.app = app
        self.token = token
        self.reason = reason
        self.invalidSince = invalidSince
        self.requestID = requestID
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
        // Only used to count the removal in a report: an unusable id is dropped, not an error.
        let requestID = event.requestID.flatMap { id in
            id.isEmpty || id.count > PushRequest.maximumIDLength || id.unicodeScalars.contains { $0.properties.generalCategory == .control }
                ? nil : id
        }
        self.init(app: event.app, token: token, reason: event.reason, invalidSince: event.invalidSince, requestID: requestID)
    }

    /// Decodes and checks a `push.feedback` body (``FeedbackEvent`` JSON).
    ///
    /// Strict, like every JSON reader of this package (``JSONValue/parse(_:maximumDepth:)``): UTF-8
    /// only, no repeated key (two `token`s would leave it to the reader which one is removed), at most
    /// 64 levels; unknown fields are ignored.
    ///
    /// - Throws: ``FeedbackError`` naming the field: `body` when it is not a JSON object, else the
    ///   missing or malformed field (`app`, `token`, `reason`, `timestamp`, `reported_at`).
    public init(feedbackBody body: [UInt8]) throws(FeedbackError) {
        // The common case read quickly (feedback arrives by the ten thousand); anything else, errors
        // included, is the strict parser's to judge.
        if let event = Self.quickEvent(body) {
            try self.init(event: event)
            return
        }
        let json: JSONValue
        do {
            json = try JSONValue.parse(body)
        } catch {
            throw FeedbackError(.invalidJSON, field: "body", "is not valid JSON (\(error))")
        }
        guard case .object = json else {
            throw FeedbackError(.invalidJSON, field: "body", "must be a JSON object (a feedback event), got \(json.kindDescription)")
        }
        func string(_ field: String) throws(FeedbackError) -> String {
            guard let value = json[field] else { throw FeedbackError(.missingField, field: field, "is required") }
            if case .null = value { throw FeedbackError(.invalidField, field: field, "must not be null") }
            guard case .string(let text) = value else {
                throw FeedbackError(.invalidField, field: field, "must be a string, got \(value.kindDescription)")
            }
            return text
        }
        func milliseconds(_ field: String) throws(FeedbackError) -> Int64? {
            switch json[field] {
            case nil, .null:
                return nil
            case .number(let text)?:
                guard let whole = Int64(text) else {
                    let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
                    throw FeedbackError(.invalidField, field: field, "must be a whole number (ms since 1970) of at most 64 bits, got \(shown)")
                }
                return whole
            case let value?:
                throw FeedbackError(.invalidField, field: field, "must be a whole number (ms since 1970), got \(value.kindDescription)")
            }
        }
        let app = try string("app")
        let token = try string("token")
        let reason = try string("reason")
        let timestamp = try milliseconds("timestamp")
        guard let reportedAt = try milliseconds("reported_at") else {
            if json["reported_at"] == nil { throw FeedbackError(.missingField, field: "reported_at", "is required") }
            throw FeedbackError(.invalidField, field: "reported_at", "must not be null")
        }
        var event = FeedbackEvent(app: app, token: token, reason: reason, timestamp: timestamp, reportedAt: reportedAt)
        if case .string(let id)? = json["request_id"] { event.requestID = id }
        try self.init(event: event)
    }

    /// The event when `body` is a JSON object whose fields have exactly the types the event needs
    /// (unknown fields are ignored); nil for anything else.
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
        var event = FeedbackEvent(app: app, token: token, reason: reason, timestamp: timestamp, reportedAt: reportedAt)
        switch object["request_id"] {
        case nil, is NSNull: break
        case let id as String: event.requestID = id
        default: return nil
        }
        return event
    }

    static func quoted(_ text: String) -> String {
        "\"\(text.count > 64 ? String(text.prefix(64)) + "…" : text)\""
    }
}
