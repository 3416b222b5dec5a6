public import PushCore
public import Redis

/// The tokens of one registry set (a user's, a topic's or the app's) in every shard, streamed in
/// batches with `SSCAN`, shard after shard, so a million-token set is never held in memory or
/// fetched in one blocking reply.
///
/// ```swift
/// for try await batch in try await registry.tokens(app: "com.example.game", topic: "news") {
///     // batch: [DeviceToken], up to about TokenRegistry.scanBatchSize tokens, never empty
/// }
/// ```
///
/// `SSCAN`'s guarantees carry over: every token in the set for the whole iteration is returned; a
/// token added or removed meanwhile may or may not be; a token may be returned twice if the set is
/// resized during the iteration (callers that must not send twice dedupe downstream). A set that does
/// not exist yields nothing.
///
/// Each iteration is one pass over the shards' sets, started afresh by each `makeAsyncIterator()`. Each
/// set ends when Redis returns cursor 0, which `SSCAN` guarantees after finitely many calls; the
/// number of calls is about the set's size divided by the batch size, plus one per shard.
public struct TokenBatches: AsyncSequence, Sendable {
    public typealias Element = [DeviceToken]
    public typealias Failure = RegistryError

    private let redis: any RedisCommandExecutor
    /// The set's key in each shard, in the order they are read.
    public let keys: [String]
    /// The `COUNT` hint of each `SSCAN`; Redis may return a few more or fewer per call.
    public let batchSize: Int

    init(redis: any RedisCommandExecutor, keys: [String], batchSize: Int) {
        self.redis = redis
        self.keys = keys
        self.batchSize = Swift.max(1, batchSize)
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(redis: redis, keys: keys, batchSize: batchSize)
    }

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        public typealias Element = [DeviceToken]
        public typealias Failure = RegistryError

        private let redis: any RedisCommandExecutor
        private let keys: [String]
        private let batchSize: Int
        /// The set being read, an index into ``keys``.
        private var index = 0
        /// The next `SSCAN` cursor in it; nil once every set is read.
        private var cursor: String?

        init(redis: any RedisCommandExecutor, keys: [String], batchSize: Int) {
            self.redis = redis
            self.keys = keys
            self.batchSize = batchSize
            self.cursor = keys.isEmpty ? nil : "0"
        }

        /// The next non-empty batch, or nil when the pass is complete.
        ///
        /// `SSCAN` may return empty pages while the cursor moves on (sparse hash tables); those are
        /// skipped here. The loop ends because every call advances the cursor and `SSCAN` reaches 0.
        public mutating func next() async throws(RegistryError) -> [DeviceToken]? {
            while let current = cursor {
                let key = keys[index]
                let reply: RedisReply
                do {
                    reply = try await redis.execute("SSCAN", key, current, "COUNT", String(batchSize))
                } catch {
                    cursor = nil
                    throw RegistryError.redis(error, during: "scan of \(key)", key: key)
                }
                guard let page = reply.array, page.count == 2, let nextCursor = page[0].string, let members = page[1].array else {
                    cursor = nil
                    throw RegistryError.unexpectedReply(reply, during: "scan of \(key)")
                }
                if nextCursor != "0" {
                    cursor = nextCursor
                } else {
                    index += 1
                    cursor = index < keys.count ? "0" : nil
                }
                var tokens: [DeviceToken] = []
                tokens.reserveCapacity(members.count)
                for member in members {
                    guard let text = member.string, let token = try? DeviceToken(normalizing: text), token.hex == text else {
                        cursor = nil
                        throw RegistryError(
                            .corruptRecord,
                            "\(key) holds a member that is not a normalised device token: \(String((member.string ?? "\(member)").prefix(8)))…",
                            key: key
                        )
                    }
                    tokens.append(token)
                }
                if !tokens.isEmpty { return tokens }
            }
            return nil
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(RegistryError) -> [DeviceToken]? {
            try await next()
        }
    }
}
