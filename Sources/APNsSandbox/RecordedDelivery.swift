/// A notification the sandbox accepted (answered 200), as `GET /deliveries` shows it: one to a
/// device token, or a broadcast on a channel (no token; the topic is the bundle id).
///
/// Stored compactly (one byte buffer) because the sandbox keeps hundreds of thousands: the token,
/// the topic, the channel id, header names and values (HTTP/2 forbids NUL in either, so NUL
/// separates them) and the payload, which was validated as a JSON object and is kept byte for byte.
public struct RecordedDelivery: Sendable {
    /// When the request was complete, ms since 1970.
    public let receivedAt: Int64
    private let storage: [UInt8]
    private let tokenEnd: Int32
    private let topicEnd: Int32
    private let channelEnd: Int32
    private let headersEnd: Int32

    /// - Parameters:
    ///   - token: The device token; empty for a broadcast.
    ///   - headers: Regular headers (no pseudo-headers); `authorization` is left out by the caller.
    ///   - channel: The channel id of a broadcast; nil for a notification to a device.
    public init(token: String, topic: String, headers: [PushRequest.Field], payload: [UInt8], receivedAt: Int64, channel: String? = nil) {
        var storage: [UInt8] = []
        storage.reserveCapacity(token.utf8.count + topic.utf8.count + payload.count + headers.count * 32)
        storage.append(contentsOf: token.utf8)
        let tokenEnd = storage.count
        storage.append(contentsOf: topic.utf8)
        let topicEnd = storage.count
        if let channel { storage.append(contentsOf: channel.utf8) }
        let channelEnd = storage.count
        for field in headers {
            storage.append(contentsOf: field.name.utf8)
            storage.append(0)
            storage.append(contentsOf: field.value.utf8)
            storage.append(0)
        }
        let headersEnd = storage.count
        storage.append(contentsOf: payload)
        self.storage = storage
        self.tokenEnd = Int32(tokenEnd)
        self.topicEnd = Int32(topicEnd)
        self.channelEnd = Int32(channelEnd)
        self.headersEnd = Int32(headersEnd)
        self.receivedAt = receivedAt
    }

    /// Lowercase hex.
    public var token: String { String(decoding: storage[0..<Int(tokenEnd)], as: UTF8.self) }
    public var topic: String { String(decoding: storage[Int(tokenEnd)..<Int(topicEnd)], as: UTF8.self) }
    /// The channel id of a broadcast; nil for a notification to a device.
    public var channel: String? {
        channelEnd == topicEnd ? nil : String(decoding: storage[Int(topicEnd)..<Int(channelEnd)], as: UTF8.self)
    }
    /// The JSON payload, as sent.
    public var payload: ArraySlice<UInt8> { storage[Int(headersEnd)...] }

    /// The request's headers, in order.
    public var headers: [PushRequest.Field] {
        var fields: [PushRequest.Field] = []
        var parts = storage[Int(channelEnd)..<Int(headersEnd)].split(separator: 0, omittingEmptySubsequences: false)
        if parts.last?.isEmpty == true { parts.removeLast() }
        var index = 0
        while index + 1 < parts.count {
            fields.append(PushRequest.Field(String(decoding: parts[index], as: UTF8.self), String(decoding: parts[index + 1], as: UTF8.self)))
            index += 2
        }
        return fields
    }

    /// Whether the topic is `app` or `app` followed by a push-type suffix (`app.voip`, …).
    func matches(app: String) -> Bool {
        let topic = storage[Int(tokenEnd)..<Int(topicEnd)]
        let app = app.utf8
        guard topic.count >= app.count, topic.starts(with: app) else { return false }
        return topic.count == app.count || topic[topic.startIndex + app.count] == UInt8(ascii: ".")
    }

    /// FNV-1a over the token, a separator and the topic: the pair's identity for ``DistinctDeliveries``.
    var identityHash: UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for (offset, byte) in storage[0..<Int(topicEnd)].enumerated() {
            // A 0 between token and topic (neither holds one) keeps "ab"+"c" apart from "a"+"bc".
            if offset == Int(tokenEnd) { hash = (hash ^ 0) &* 0x0000_0100_0000_01b3 }
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    func matches(token: String) -> Bool {
        storage[0..<Int(tokenEnd)].elementsEqual(token.utf8)
    }
}
