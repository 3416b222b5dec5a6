public import Redis

/// What push-send knows about each notification of a request, kept in Redis so it outlives a crash:
/// whether APNs accepted it, and (for at-most-once apps) whether it was handed to APNs at all.
///
/// One bitmap per mark set (the send batch push-render made; retries keep their original batch's
/// mark set, see ``PushCore/SendBatch/markSet``): `push:marks:{<app>:<mark set>}`, two bits per
/// token slot: bit `2·slot` = accepted, bit `2·slot + 1` = claimed (sent, answer not yet known).
/// A 500-token batch costs one key of about 125 bytes of bits (well under a byte a token), where a
/// key per token cost about 290 bytes a token. Each mark set is its own hash tag, so a broadcast's
/// marks spread over every master of a Redis Cluster (they were under the app's tag, `{<app>}`,
/// before; marks of batches in flight across that upgrade are not found, see docs/clusters.md, "Moving an existing registry").
///
/// Reading a batch's marks is one `GET`; marking is `BITFIELD … SET u1 <bit> 1` plus `EXPIRE`,
/// pipelined across batches by ``AcceptanceMarker``.
public struct DeliveryLedger: Sendable {
    private let redis: any RedisCommandExecutor
    /// How long a mark set is kept: longer than a batch can take through every retry tier.
    public let ttl: Duration
    /// The first part of every key (`push`; tests use their own).
    public let keyPrefix: String

    /// Bit changes per `BITFIELD` command, so one flush never becomes one huge command.
    static let chunkSize = 512

    public init(redis: any RedisCommandExecutor, ttl: Duration, keyPrefix: String = "push") {
        self.redis = redis
        self.ttl = ttl
        self.keyPrefix = keyPrefix
    }

    public func key(app: String, markSet: String) -> String {
        "\(keyPrefix):marks:{\(app):\(markSet)}"
    }

    /// The marks of one mark set (empty when none was written, or they expired).
    public func marks(key: String) async throws(RedisError) -> DeliveryMarks {
        let reply = try await redis.execute(RedisCommand(["GET", key]))
        if reply.isNull { return DeliveryMarks(bits: []) }
        guard let bits = reply.bytes else {
            throw RedisError(.protocolError, "GET \(key): unexpected reply \(reply)")
        }
        return DeliveryMarks(bits: bits)
    }

    /// Sets (`value` true) or clears bits, as `(key, bit offset)` pairs, in one pipeline: per key
    /// `BITFIELD` commands of at most ``chunkSize`` changes, then one `EXPIRE`.
    public func write(_ bits: [(key: String, bit: Int)], value: Bool) async throws(RedisError) {
        if bits.isEmpty { return }
        var order: [String] = []
        var offsets: [String: [Int]] = [:]
        for (key, bit) in bits {
            if offsets[key] == nil { order.append(key) }
            offsets[key, default: []].append(bit)
        }
        let seconds = Swift.max(1, ttl.components.seconds)
        var commands: [RedisCommand] = []
        for key in order {
            let keyBits = offsets[key]!
            var start = 0
            while start < keyBits.count {
                var command: RedisCommand = ["BITFIELD", key]
                for bit in keyBits[start..<Swift.min(start + Self.chunkSize, keyBits.count)] {
                    command.append("SET")
                    command.append("u1")
                    command.append(bit)
                    command.append(value ? 1 : 0)
                }
                commands.append(command)
                start += Self.chunkSize
            }
            var expire: RedisCommand = ["EXPIRE", key]
            expire.append(seconds)
            commands.append(expire)
        }
        for reply in try await redis.pipeline(commands) {
            _ = try reply.throwingServerError()
        }
    }
}

/// One mark set's bits as read from Redis (see ``DeliveryLedger``).
public struct DeliveryMarks: Sendable, Equatable {
    /// Redis' bit order: bit 0 is the most significant bit of the first byte.
    let bits: [UInt8]

    public static func acceptedBit(slot: Int) -> Int { 2 * slot }
    public static func claimedBit(slot: Int) -> Int { 2 * slot + 1 }

    /// APNs accepted the token in this slot.
    public func isAccepted(slot: Int) -> Bool { bit(Self.acceptedBit(slot: slot)) }

    /// The token in this slot was handed to APNs by an at-most-once sender and no answer was recorded.
    public func isClaimed(slot: Int) -> Bool { bit(Self.claimedBit(slot: slot)) }

    public var isEmpty: Bool { !bits.contains { $0 != 0 } }

    /// How many slots APNs accepted: the set bits at even offsets (`0b1010_1010` of every byte).
    public var acceptedCount: Int { bits.reduce(0) { $0 + ($1 & 0xAA).nonzeroBitCount } }

    private func bit(_ offset: Int) -> Bool {
        let byte = offset / 8
        guard offset >= 0, byte < bits.count else { return false }
        return bits[byte] & (0x80 >> UInt8(offset % 8)) != 0
    }
}
