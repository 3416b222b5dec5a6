/// A send batch (push-render → `push.send` → push-send): one rendered payload for up to a few hundred
/// tokens of one app and environment. Broker load is per batch, not per device.
///
/// JSON (snake_case keys; optional keys may be absent):
/// ```json
/// {"v": 1, "request_id": "order-4711-shipped", "batch_id": "order-4711-shipped/3",
///  "app": "com.example.shop", "environment": "production", "push_type": "alert", "priority": 10,
///  "expiration": 1767225600, "collapse_id": "order-4711", "payload": "{\"aps\":{…}}",
///  "tokens": ["a1b2…", …], "attempt": 0, "created_at": 1767225000123}
/// ```
/// - `payload` is the serialised APNs payload as a JSON **string**, so push-send sends exactly the
///   bytes push-render measured against the size limit.
/// - `attempt` counts earlier tries of these tokens (0 for a fresh batch); push-send raises it when it
///   republishes the tokens that need another try to a delayed-retry tier.
/// - `expiration` is APNs' (seconds since 1970; 0 = try once; absent = APNs' default).
/// - `mark_set` and `slots` (optional; push-send sets them on the batches it republishes) say where
///   each token's delivery mark lives: bit `slots[i]` of the mark set `mark_set`. Absent, the mark set
///   is the batch itself (`batch_id` and a fingerprint of its tokens) and token `i` has slot `i`, as
///   for every batch push-render makes.
/// - `channel` (optional): a broadcast on this iOS 18 broadcast channel instead of tokens; `tokens`
///   is then empty, and push-send makes one APNs broadcast request for the batch.
public struct SendBatch: Codable, Sendable, Equatable {
    /// Format version; 1.
    public var version: Int
    /// The push request's `id`: the idempotency key shared by every batch of the request.
    public var requestID: String
    /// Unique per batch: `<request id>/<sequence>`, with a suffix for retries.
    public var batchID: String
    /// The app's bundle id (the `apns-topic` before the push type's suffix).
    public var app: String
    public var environment: AppConfiguration.Environment
    /// The `apns-push-type` value, e.g. `alert`.
    public var pushType: String
    /// The `apns-priority` value: 10, 5 or 1.
    public var priority: Int
    public var expiration: Int64?
    public var collapseID: String?
    /// The serialised APNs payload (`{"aps": {…}, …}`).
    public var payload: String
    /// Lowercase hex device tokens, each at most once.
    public var tokens: [String]
    public var attempt: Int
    /// When push-render made the batch (ms since 1970).
    public var createdAt: Int64
    /// The batch whose delivery marks these tokens use (nil: this one).
    public var markSet: String?
    /// Each token's place in ``markSet`` (nil: its index in ``tokens``).
    public var slots: [Int]?
    /// The broadcast channel id of a broadcast batch (nil: a batch of device tokens).
    public var channel: String?

    public init(
        requestID: String, batchID: String, app: String, environment: AppConfiguration.Environment, pushType: String,
        priority: Int, expiration: Int64? = nil, collapseID: String? = nil, payload: String, tokens: [String],
        attempt: Int = 0, createdAt: Int64, markSet: String? = nil, slots: [Int]? = nil, channel: String? = nil
    ) {
        self.version = 1
        self.requestID = requestID
        self.batchID = batchID
        self.app = app
        self.environment = environment
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.payload = payload
        self.tokens = tokens
        self.attempt = attempt
        self.createdAt = createdAt
        self.markSet = markSet
        self.slots = slots
        self.channel = channel
    }

    /// The mark set the tokens' delivery marks belong to: ``markSet``, or this batch's id with a
    /// fingerprint of its tokens. The fingerprint matters: a batch id alone does not pin its tokens
    /// (push-render resuming after a crash, or after Redis lost its last second of writes, can make
    /// another `<request>/<n>` with other tokens), and another batch's marks read by slot would skip
    /// tokens that were never sent.
    public var effectiveMarkSet: String { markSet ?? Self.markSet(batchID: batchID, tokens: tokens) }

    /// The longest mark set name push-send takes (its Redis key is a little longer).
    public static let maximumMarkSetBytes = 512

    /// The mark set of a batch push-render made: `<batch id>#<fingerprint of its tokens>`, at most
    /// ``maximumMarkSetBytes``. A request id is 128 characters, but a character can be many bytes;
    /// a longer batch id is shortened the way ``messageID(forBatchID:)`` shortens it, so a retry that
    /// names its mark set (``markSet``) is never refused for its length.
    public static func markSet(batchID: String, tokens: [String]) -> String {
        let name = batchID.utf8.count <= maximumMarkSetBytes - 17 ? batchID : messageID(forBatchID: batchID)
        return "\(name)#\(fingerprint(tokens))"
    }

    /// 16 hex digits of FNV-1a over the tokens in order.
    public static func fingerprint(_ tokens: [String]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for token in tokens {
            for byte in token.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            hash = (hash ^ 0x2c) &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The longest AMQP `message-id` (a short string: 255 bytes).
    public static let maximumMessageIDBytes = 255

    /// The AMQP `message-id` of the batch `batchID`: the id itself when it fits a short string,
    /// else its first characters (at most 238 bytes), `~` and 16 hex digits of its FNV-1a hash. A
    /// request id may be 128 characters of 4 bytes each; a longer property cannot be encoded, and
    /// the client would drop the broker connection trying.
    public static func messageID(forBatchID batchID: String) -> String {
        if batchID.utf8.count <= maximumMessageIDBytes { return batchID }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in batchID.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        var prefix = ""
        var bytes = 0
        for character in batchID {
            let size = character.utf8.count
            if bytes + size > maximumMessageIDBytes - 17 { break }
            prefix.append(character)
            bytes += size
        }
        let hex = String(hash, radix: 16)
        return prefix + "~" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The mark slot of the token at `index`.
    public func slot(at index: Int) -> Int { slots?[index] ?? index }

    enum CodingKeys: String, CodingKey {
        case version = "v"
        case requestID = "request_id"
        case batchID = "batch_id"
        case app
        case environment
        case pushType = "push_type"
        case priority
        case expiration
        case collapseID = "collapse_id"
        case payload
        case tokens
        case attempt
        case createdAt = "created_at"
        case markSet = "mark_set"
        case slots
        case channel
    }
}

extension AppConfiguration.Environment: Codable {}
