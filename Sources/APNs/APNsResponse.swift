import Foundation

/// APNs' answer to one notification.
public struct APNsResponse: Sendable, Equatable {
    /// The HTTP status: 200 accepted; 400, 403, 404, 405, 410, 413, 429, 500, 503 refused.
    public var status: Int
    /// `apns-id`: the notification's id (the one sent, or one APNs made up).
    public var apnsID: String?
    /// `apns-unique-id`: present in the development environment only, for Apple's delivery log.
    public var apnsUniqueID: String?
    /// Why it was refused; nil when accepted.
    public var reason: APNsReason?
    /// For 410: when APNs learned the token was no longer valid (ms since 1970).
    public var timestamp: Int64?
    /// From the request's stream opening to the answer: APNs' own latency, without the time the
    /// request waited in the client for a stream (nil when built by hand).
    public var roundTrip: Duration?

    public init(status: Int, apnsID: String? = nil, apnsUniqueID: String? = nil, reason: APNsReason? = nil, timestamp: Int64? = nil) {
        self.status = status
        self.apnsID = apnsID
        self.apnsUniqueID = apnsUniqueID
        self.reason = reason
        self.timestamp = timestamp
    }

    /// Reads `reason` and `timestamp` from a refusal's JSON body; a body that is not the documented
    /// JSON keeps its text as the reason rather than being lost.
    public init(status: Int, apnsID: String?, apnsUniqueID: String?, body: [UInt8]) {
        self.init(status: status, apnsID: apnsID, apnsUniqueID: apnsUniqueID)
        guard !body.isEmpty else { return }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            reason = APNsReason(String(decoding: body.prefix(200), as: UTF8.self))
            return
        }
        if let text = object["reason"] as? String { reason = APNsReason(text) }
        if let number = object["timestamp"] as? NSNumber { timestamp = number.int64Value }
    }

    /// What push-send does about it.
    public var outcome: APNsOutcome { APNsOutcome(status: status, reason: reason, timestamp: timestamp) }
}
