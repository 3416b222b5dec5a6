public import Redis

/// Which notifications APNs already accepted, in Redis, so a batch redelivered after a crash (or
/// requeued at shutdown) skips them: one key per (request id, token),
/// `push:{<app>}:sent:<request id>:<token>`, with a TTL.
///
/// The app's hash tag keeps one batch's keys in one Redis Cluster slot, so the lookup is one `MGET`
/// and the marks one pipeline. Marks are written after APNs answered 200 and before the batch is
/// acked; a crash between the two costs at most that batch's duplicates, never a lost notification.
public struct DeliveryLedger: Sendable {
    private let redis: any RedisCommandExecutor
    /// How long a mark is kept: longer than a batch can take through every retry tier.
    public let ttl: Duration
    /// The first part of every key (`push`; tests use their own).
    public let keyPrefix: String

    /// Keys per `MGET` and per pipeline, so one huge batch never becomes one huge command.
    static let chunkSize = 1000

    public init(redis: any RedisCommandExecutor, ttl: Duration, keyPrefix: String = "push") {
        self.redis = redis
        self.ttl = ttl
        self.keyPrefix = keyPrefix
    }

    public func key(app: String, requestID: String, token: String) -> String {
        "\(keyPrefix):{\(app)}:sent:\(requestID):\(token)"
    }

    /// The tokens of `tokens` already marked as accepted for `requestID`.
    public func accepted(app: String, requestID: String, tokens: [String]) async throws(RedisError) -> Set<String> {
        var accepted: Set<String> = []
        var start = 0
        while start < tokens.count {
            let chunk = tokens[start..<Swift.min(start + Self.chunkSize, tokens.count)]
            let reply = try await redis.execute(RedisCommand(["MGET"] + chunk.map { key(app: app, requestID: requestID, token: $0) }))
            guard let values = reply.array, values.count == chunk.count else {
                throw RedisError(.protocolError, "MGET of \(chunk.count) delivery marks: unexpected reply \(reply)")
            }
            for (token, value) in zip(chunk, values) where !value.isNull {
                accepted.insert(token)
            }
            start += chunk.count
        }
        return accepted
    }

    /// Marks `tokens` as accepted for `requestID` (`SET key 1 EX ttl`, pipelined).
    public func markAccepted(app: String, requestID: String, tokens: [String]) async throws(RedisError) {
        try await markAccepted(keys: tokens.map { key(app: app, requestID: requestID, token: $0) })
    }

    /// Marks the given keys (from ``key(app:requestID:token:)``), pipelined in chunks.
    public func markAccepted(keys: [String]) async throws(RedisError) {
        let seconds = Swift.max(1, ttl.components.seconds)
        var start = 0
        while start < keys.count {
            let chunk = keys[start..<Swift.min(start + Self.chunkSize, keys.count)]
            let commands = chunk.map { key -> RedisCommand in
                var command: RedisCommand = ["SET", key, "1", "EX"]
                command.append(seconds)
                return command
            }
            for reply in try await redis.pipeline(commands) {
                _ = try reply.throwingServerError()
            }
            start += chunk.count
        }
    }
}
