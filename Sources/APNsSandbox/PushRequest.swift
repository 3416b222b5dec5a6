import APNs

import struct PushCore.PushType

/// One HTTP/2 request as the sandbox received it: what ``PushRequestValidator`` judges.
public struct PushRequest: Sendable, Equatable {
    /// One regular (non-pseudo) header; HTTP/2 names are lowercase.
    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// `:method`.
    public var method: String
    /// `:path`.
    public var path: String
    /// Regular headers in arrival order (duplicates kept: APNs refuses them).
    public var headers: [Field]
    /// The body, kept up to ``maximumKeptBody`` bytes.
    public var body: [UInt8]
    /// The body's full length (it may be longer than what was kept).
    public var bodyLength: Int

    /// Bytes of body kept: one more than the largest payload APNs accepts, enough to tell "too large".
    public static let maximumKeptBody = PushType.voip.maximumPayloadSize + 1

    public init(method: String, path: String, headers: [Field], body: [UInt8], bodyLength: Int? = nil) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.bodyLength = bodyLength ?? body.count
    }

    /// The first value of header `name`.
    public func value(of name: String) -> String? {
        headers.first(where: { $0.name == name })?.value
    }

    /// `apns-id` when it is a well-formed UUID (answers echo it), else nil.
    public var validAPNsID: String? {
        guard let id = value(of: "apns-id"), PushRequestValidator.isUUID(id) else { return nil }
        return id
    }
}

/// How the connection a request came on authenticated.
public enum ConnectionAuthentication: Sendable, Equatable {
    /// No client certificate: requests need a provider token.
    case none
    /// A client certificate the `--client-ca` signed; `topic` is its subject's UID (the bundle id
    /// APNs certificates carry), the default `apns-topic`.
    case certificate(topic: String?)
    /// A client certificate that did not verify against `--client-ca`.
    case untrustedCertificate
}

/// A request the validator accepted: what the delivery is about.
public struct AcceptedPush: Sendable, Equatable {
    /// Lowercase hex.
    public var deviceToken: String
    public var topic: String
    public var pushType: PushType

    public init(deviceToken: String, topic: String, pushType: PushType) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
    }
}

/// APNs' refusal: the status, the `reason`, and for 410 the `timestamp` (ms since 1970).
public struct PushRejection: Sendable, Equatable, CustomStringConvertible {
    public var status: Int
    public var reason: APNsReason
    public var timestamp: Int64?

    public init(_ status: Int, _ reason: APNsReason, timestamp: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
    }

    /// The response body APNs sends: `{"reason":"…"}`, plus `"timestamp"` for 410.
    public var body: [UInt8] {
        if let timestamp {
            return Array(#"{"reason":"\#(reason.rawValue)","timestamp":\#(timestamp)}"#.utf8)
        }
        return Array(#"{"reason":"\#(reason.rawValue)"}"#.utf8)
    }

    public var description: String { "\(status) \(reason)" }
}

/// What the validator decided.
public enum PushValidation: Sendable, Equatable {
    case accepted(AcceptedPush)
    case rejected(PushRejection)
}
