public import PushCore
public import Redis

/// The tokens of one registry set (a user's, a topic's or the app's), streamed in batches with
/// `SSCAN`, so a million-token set is never held in memory or fetched in one blocking reply.
///
/// ```swift
/// for try await batch in registry.tokens(app: "com.example.game", topic: "news") {
///     // batch: [DeviceToken], up to about TokenRegistry.scanBatchSize tokens, never empty
/// }
/// ```
///
/// `SSCAN`'s guarantees carry over: every token in the set for the whole iteration is returned; a
/// token added or removed meanwhile may or may not be; a token may be returned twice if the set is
/// resized during the iteration (callers that must not send twice dedupe downstream). A set that does
/// not exist yields nothing.
///
/// Each iteration is one pass over the set, started afresh by each `makeAsyncIterator()`. It ends when
/// Redis returns cursor 0, which `SSCAN` guarantees after finitely many calls; the number of calls is
/// about the set's size divided by the batch size.
public struct TokenBatches: AsyncSequence, Sendable {
    public typealias Element = [DeviceToken]
    public typealias Failure = RegistryError

    private let redis: any RedisCommandExecutor
    /// The set's key.
    public let key: String
    /// The `COUNT` hint of each `SSCAN`; Redis may return a few more or fewer per call.
    public let batchSize: Int

    init(redis: any RedisCommandExecutor, key: String, batchSize: Int) {
        self.redis = redis
        self.key = key
        self.batchSize = Swift.max(1, batchSize)
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(redis: redis, key: key, batchSize: batchSize)
    }

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        public typealias Element = [DeviceToken]
        public typealias Failure = RegistryError

        private let redis: any RedisCommandExecutor
        private let key: String
        private let batchSize: Int
        /// The next `SSCAN` cursor; nil once Redis returned cursor 0.
        private var cursor: String? = "0"

        init(redis: any RedisCommandExecutor, key: String, batchSize: Int) {
            self.redis = redis
            self.key = key
            self.batchSize = batchSize
        }

        /// The next non-empty batch, or nil when the pass is complete.
        ///
        /// `SSCAN` may return empty pages while the cursor moves on (sparse hash tables); those are
        /// skipped here. The loop ends because every call advances the cursor and `SSCAN` reaches 0.
        public mutating func next() async throws(RegistryError) -> [DeviceToken]? {
            while let current = cursor {
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
                cursor = nextCursor == "0" ? nil : nextCursor
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
