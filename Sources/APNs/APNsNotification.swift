import Foundation
import PushCore

/// One notification to one device: everything APNs reads from a request's path, headers and body.
public struct APNsNotification: Sendable, Equatable {
    /// The device token, lowercase hex (the request path `/3/device/<token>`).
    public var deviceToken: String
    /// `apns-topic`: the bundle id with the suffix the push type needs (``PushType/topic(forBundleID:)``).
    public var topic: String
    public var pushType: PushType
    public var priority: APNsPriority
    /// `apns-expiration`: seconds since 1970 until which APNs keeps retrying delivery; 0 = once.
    public var expiration: Int64?
    /// `apns-collapse-id`: notifications with the same id replace each other on the device.
    public var collapseID: String?
    /// `apns-id`: a UUID identifying the notification; APNs makes one up when absent.
    public var apnsID: UUID?
    /// The JSON payload (`{"aps": {…}, …}`), already serialised.
    public var payload: [UInt8]

    public init(
        deviceToken: String, topic: String, pushType: PushType = .alert, priority: APNsPriority = .immediate,
        expiration: Int64? = nil, collapseID: String? = nil, apnsID: UUID? = nil, payload: [UInt8]
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = payload
    }

    /// Checks what APNs would refuse with a 400, so such a notification is never sent.
    public func validate() throws(APNsRequestError) {
        guard (64...200).contains(deviceToken.utf8.count), deviceToken.utf8.count % 2 == 0,
            Self.allBytes(of: deviceToken, { (48...57).contains($0) || (97...102).contains($0) })
        else {
            throw APNsRequestError(field: "device_token", "must be 64–200 lowercase hex characters, even length")
        }
        guard !topic.isEmpty, Self.allBytes(of: topic, { $0 > 32 && $0 < 127 }) else {
            throw APNsRequestError(field: "apns-topic", "must be a non-empty bundle id without spaces")
        }
        if pushType != .mdm, !pushType.topicSuffix.isEmpty, !topic.hasSuffix(pushType.topicSuffix) {
            throw APNsRequestError(field: "apns-topic", "'\(topic)' must end in '\(pushType.topicSuffix)' for push type \(pushType)")
        }
        guard pushType.allowedPriorities.contains(priority.rawValue) else {
            throw APNsRequestError(
                field: "apns-priority",
                "\(priority.rawValue) is not allowed for push type \(pushType) (use \(pushType.allowedPriorities.map(String.init).joined(separator: " or "))); APNs answers BadPriority"
            )
        }
        if let collapseID, collapseID.utf8.count > 64 {
            throw APNsRequestError(field: "apns-collapse-id", "must be at most 64 bytes (got \(collapseID.utf8.count))")
        }
        if let expiration, expiration < 0 {
            throw APNsRequestError(field: "apns-expiration", "must be 0 or seconds since 1970 (got \(expiration))")
        }
        guard !payload.isEmpty else {
            throw APNsRequestError(field: "payload", "must not be empty")
        }
        guard payload.count <= pushType.maximumPayloadSize else {
            throw APNsRequestError(field: "payload", "is \(payload.count) bytes; \(pushType) allows \(pushType.maximumPayloadSize)")
        }
    }

    /// Whether every UTF-8 byte of `text` passes `test`: read in place for a native string (every
    /// request is validated; iterating `utf8` goes through an index per byte).
    private static func allBytes(of text: String, _ test: (UInt8) -> Bool) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(test) } ?? text.utf8.allSatisfy(test)
    }

    /// The request headers, in the order they are sent (pseudo-headers first).
    public func headers(authority: String, authorization: String?) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", authority),
            (":path", "/3/device/\(deviceToken)"),
            ("apns-topic", topic),
            ("apns-push-type", pushType.rawValue),
            ("apns-priority", String(priority.rawValue)),
        ]
        if let authorization { headers.append(("authorization", authorization)) }
        if let expiration { headers.append(("apns-expiration", String(expiration))) }
        if let collapseID { headers.append(("apns-collapse-id", collapseID)) }
        if let apnsID { headers.append(("apns-id", apnsID.uuidString.lowercased())) }
        headers.append(("content-type", "application/json"))
        headers.append(("content-length", String(payload.count)))
        return headers
    }
}

/// A notification APNs would refuse, naming the header or part at fault.
public struct APNsRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    public let field: String
    public let reason: String

    public init(field: String, _ reason: String) {
        self.field = field
        self.reason = reason
    }

    public var description: String { "\(field): \(reason)" }
}
