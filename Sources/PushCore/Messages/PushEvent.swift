/// An outcome event on the `push.events` topic exchange, for other services to follow.
///
/// Routing keys and bodies (JSON, snake_case; absent keys are left out):
/// - `delivered`: one per send batch, not per device —
///   `{"event": "delivered", "app", "request_id", "batch_id", "count", "at"}`;
/// - `failed.<Reason>` (e.g. `failed.Unregistered`, `failed.Expired`): one per batch and reason —
///   `{"event": "failed", "reason", "app", "request_id", "batch_id", "count", "tokens", "at"}`;
/// - `token.removed`: one per removed token — `{"event": "token.removed", "app", "token", "reason", "at"}`.
///
/// `at` is when the event happened (ms since 1970).
public struct PushEvent: Codable, Sendable, Equatable {
    public var event: String
    public var app: String
    public var requestID: String?
    public var batchID: String?
    public var reason: String?
    public var count: Int?
    public var token: String?
    public var tokens: [String]?
    /// The broadcast channel of a broadcast batch's event (no tokens then).
    public var channel: String?
    public var at: Int64

    public init(
        event: String, app: String, requestID: String? = nil, batchID: String? = nil, reason: String? = nil,
        count: Int? = nil, token: String? = nil, tokens: [String]? = nil, channel: String? = nil, at: Int64
    ) {
        self.event = event
        self.app = app
        self.requestID = requestID
        self.batchID = batchID
        self.reason = reason
        self.count = count
        self.token = token
        self.tokens = tokens
        self.channel = channel
        self.at = at
    }

    /// The routing key on `push.events`: `delivered`, `failed.<Reason>` or `token.removed`.
    public var routingKey: String {
        event == "failed" ? "failed.\(reason ?? "Unknown")" : event
    }

    /// A batch's accepted notifications.
    public static func delivered(app: String, requestID: String, batchID: String, count: Int, at: Int64) -> PushEvent {
        PushEvent(event: "delivered", app: app, requestID: requestID, batchID: batchID, count: count, at: at)
    }

    /// A broadcast APNs accepted for every device listening on `channel`.
    public static func broadcastDelivered(app: String, requestID: String, batchID: String, channel: String, at: Int64) -> PushEvent {
        PushEvent(event: "delivered", app: app, requestID: requestID, batchID: batchID, count: 1, channel: channel, at: at)
    }

    /// A broadcast that failed for `reason`.
    public static func broadcastFailed(app: String, requestID: String, batchID: String, channel: String, reason: String, at: Int64) -> PushEvent {
        PushEvent(event: "failed", app: app, requestID: requestID, batchID: batchID, reason: reason, count: 1, channel: channel, at: at)
    }

    /// A batch's notifications that failed for one reason.
    public static func failed(app: String, requestID: String, batchID: String, reason: String, tokens: [String], at: Int64) -> PushEvent {
        PushEvent(event: "failed", app: app, requestID: requestID, batchID: batchID, reason: reason, count: tokens.count, tokens: tokens, at: at)
    }

    /// A token push-feedback removed from the registry.
    public static func tokenRemoved(app: String, token: String, reason: String, at: Int64) -> PushEvent {
        PushEvent(event: "token.removed", app: app, reason: reason, token: token, at: at)
    }

    enum CodingKeys: String, CodingKey {
        case event, app
        case requestID = "request_id"
        case batchID = "batch_id"
        case reason, count, token, tokens, channel, at
    }
}
