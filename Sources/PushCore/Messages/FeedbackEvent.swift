/// An invalid-token report (push-send → `push.feedback` → push-feedback): APNs called a token dead.
///
/// JSON:
/// ```json
/// {"app": "com.example.shop", "token": "a1b2…", "reason": "Unregistered",
///  "timestamp": 1767225000123, "reported_at": 1767225000456}
/// ```
/// - `reason`: APNs' reason (`Unregistered`, `ExpiredToken`, `BadDeviceToken`, `DeviceTokenNotForTopic`).
/// - `timestamp`: APNs' 410 timestamp (ms since 1970), when APNs learned the token was invalid; absent
///   for 400 answers, which carry none (push-feedback then uses `reported_at`).
/// - `reported_at`: when push-send got the answer (ms since 1970).
/// - `request_id` (optional): the push request whose send got the answer; push-feedback counts the
///   removal in that request's report.
///
/// The invalid-token rule (CONTRACT.md) removes the token only if it was not registered again after
/// `timestamp ?? reported_at`.
public struct FeedbackEvent: Codable, Sendable, Equatable {
    public var app: String
    public var token: String
    public var reason: String
    public var timestamp: Int64?
    public var reportedAt: Int64
    public var requestID: String?

    public init(app: String, token: String, reason: String, timestamp: Int64?, reportedAt: Int64, requestID: String? = nil) {
        self.app = app
        self.token = token
        self.reason = reason
        self.timestamp = timestamp
        self.reportedAt = reportedAt
        self.requestID = requestID
    }

    /// The moment the token is known to have been invalid: APNs' timestamp, else the report time.
    public var invalidSince: Int64 { timestamp ?? reportedAt }

    enum CodingKeys: String, CodingKey {
        case app, token, reason, timestamp
        case reportedAt = "reported_at"
        case requestID = "request_id"
    }
}
