/// The basic properties of a message, as AMQP 0-9-1 defines them.
///
/// Defaults are what this system publishes: persistent JSON.
public struct AMQPProperties: Sendable, Equatable {
    public var contentType: String?
    public var contentEncoding: String?
    public var headers: AMQPTable
    /// Persistent messages (delivery mode 2) survive a broker restart in durable queues.
    public var persistent: Bool
    public var priority: UInt8?
    public var correlationID: String?
    public var replyTo: String?
    /// Per-message TTL in milliseconds, as a decimal string (AMQP's own encoding).
    public var expiration: String?
    public var messageID: String?
    /// Seconds since 1970.
    public var timestamp: UInt64?
    public var type: String?
    public var appID: String?

    public init(
        contentType: String? = "application/json",
        contentEncoding: String? = nil,
        headers: AMQPTable = [:],
        persistent: Bool = true,
        priority: UInt8? = nil,
        correlationID: String? = nil,
        replyTo: String? = nil,
        expiration: String? = nil,
        messageID: String? = nil,
        timestamp: UInt64? = nil,
        type: String? = nil,
        appID: String? = nil
    ) {
        self.contentType = contentType
        self.contentEncoding = contentEncoding
        self.headers = headers
        self.persistent = persistent
        self.priority = priority
        self.correlationID = correlationID
        self.replyTo = replyTo
        self.expiration = expiration
        self.messageID = messageID
        self.timestamp = timestamp
        self.type = type
        self.appID = appID
    }
}

/// A message to publish: where it goes, its body and properties.
public struct AMQPOutboundMessage: Sendable {
    public var exchange: String
    public var routingKey: String
    public var body: [UInt8]
    public var properties: AMQPProperties
    /// When set, a message that matches no queue comes back as an ``AMQPError/Code/unroutable`` error
    /// instead of vanishing. Leave it off for event exchanges nobody may be listening to.
    public var mandatory: Bool

    public init(exchange: String, routingKey: String, body: [UInt8], properties: AMQPProperties = AMQPProperties(), mandatory: Bool = true) {
        self.exchange = exchange
        self.routingKey = routingKey
        self.body = body
        self.properties = properties
        self.mandatory = mandatory
    }
}

extension AMQPOutboundMessage {
    /// Why this message cannot be encoded, if it cannot: AMQP's short strings (the exchange, the
    /// routing key, every named property, header names) hold at most 255 bytes, and the broker
    /// closes the whole connection over one that does not fit.
    var encodingProblem: String? {
        func tooLong(_ value: String?) -> Bool { (value?.utf8.count ?? 0) > 255 }
        let named: [(String, String?)] = [
            ("exchange", exchange), ("routing key", routingKey), ("content type", properties.contentType),
            ("content encoding", properties.contentEncoding), ("correlation id", properties.correlationID),
            ("reply to", properties.replyTo), ("expiration", properties.expiration), ("message id", properties.messageID),
            ("type", properties.type), ("app id", properties.appID),
        ]
        if let (name, value) = named.first(where: { tooLong($0.1) }) {
            return "its \(name) is \(value?.utf8.count ?? 0) bytes; AMQP allows at most 255"
        }
        if let key = Self.headerNameTooLong(properties.headers, depth: 0) {
            return "its header name '\(key.prefix(40))…' is \(key.utf8.count) bytes; AMQP allows at most 255"
        }
        return nil
    }

    private static func headerNameTooLong(_ table: AMQPTable, depth: Int) -> String? {
        for (key, value) in table {
            if key.utf8.count > 255 { return key }
            if depth < AMQPFieldValue.maximumDepth, case .table(let nested) = value, let found = headerNameTooLong(nested, depth: depth + 1) {
                return found
            }
        }
        return nil
    }
}
