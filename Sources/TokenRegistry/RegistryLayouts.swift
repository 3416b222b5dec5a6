import Logging
public import Redis
import Synchronization

/// Each app's ``RegistryState`` as Redis holds it, cached for ``cacheLifetime``.
///
/// The layout lives with the data, in the hash `{prefix}:{<app>}:layout` (``RegistryKeys/layoutKey(prefix:app:)``):
/// `shards` (the layout's shard count) and, while `pushctl registry migrate` moves the registry,
/// `from` (the layout it leaves). So every service of a deployment reads the same layout, and no
/// configuration can make two of them disagree about where a device is.
///
/// An app without the hash gets one on first use, atomically (one script on the app's own slot):
/// - if the single-tag registry of the app holds tokens (a registry from before issue 14), it stays
///   in that layout (`shards` 1) until migrated;
/// - otherwise `shards` = ``defaultShards`` (`PUSH_REGISTRY_SHARDS`, default 24).
///
/// A migration changes the hash; services see it within ``cacheLifetime``. Writes to the single-tag
/// layout check the hash in the same script and are refused once a migration started, so no write
/// lands behind the migration (``TokenRegistry`` then reads the state again and retries).
public final class RegistryLayouts: Sendable {
    private let redis: any RedisCommandExecutor
    public let keyPrefix: String
    /// The layout of an app's new registry.
    public let defaultShards: Int
    /// How long a state read from Redis is trusted.
    public let cacheLifetime: Duration
    private let cache = Mutex<[String: (state: RegistryState, readAt: ContinuousClock.Instant)]>([:])

    public init(
        redis: any RedisCommandExecutor, keyPrefix: String = "push", defaultShards: Int = RegistryLayout.defaultShards,
        cacheLifetime: Duration = .seconds(2)
    ) {
        precondition((1...RegistryLayout.maximumShards).contains(defaultShards), "1 to \(RegistryLayout.maximumShards) shards")
        self.redis = redis
        self.keyPrefix = keyPrefix
        self.defaultShards = defaultShards
        self.cacheLifetime = cacheLifetime
    }

    /// `app`'s state: from the cache while fresh, else from Redis (creating the layout of a new
    /// registry).
    public func state(app: String) async throws(RegistryError) -> RegistryState {
        let now = ContinuousClock.now
        if let cached = cache.withLock({ $0[app] }), now - cached.readAt < cacheLifetime { return cached.state }
        let state = try await read(app: app)
        cache.withLock { $0[app] = (state, now) }
        return state
    }

    /// Forgets `app`'s cached state (a write was refused because the layout changed).
    public func invalidate(app: String) {
        _ = cache.withLock { $0.removeValue(forKey: app) }
    }

    private func read(app: String) async throws(RegistryError) -> RegistryState {
        let layoutKey = RegistryKeys.layoutKey(prefix: keyPrefix, app: app)
        let legacyTokens = RegistryLayout.legacy.keys(prefix: keyPrefix, app: app, shard: 0).tokens
        let reply: RedisReply
        do {
            reply = try await redis.evalScript(Self.stateScript, keys: [layoutKey, legacyTokens], args: [String(defaultShards)])
        } catch {
            throw RegistryError.redis(error, during: "read of \(layoutKey)", key: layoutKey)
        }
        return try Self.state(reply, key: layoutKey)
    }

    /// `{shards, from}` from the layout hash's fields (`from` "" when settled).
    static func state(_ reply: RedisReply, key: String) throws(RegistryError) -> RegistryState {
        guard let fields = reply.array, fields.count == 2, let shardsText = fields[0].string, let fromText = fields[1].string else {
            throw RegistryError.unexpectedReply(reply, during: "read of \(key)")
        }
        func layout(_ text: String, field: String) throws(RegistryError) -> RegistryLayout {
            guard let count = Int(text), (1...RegistryLayout.maximumShards).contains(count) else {
                throw RegistryError.corrupt(key: key, field: field, "must be 1–\(RegistryLayout.maximumShards) shards, got \"\(text)\"")
            }
            return RegistryLayout(shards: count)
        }
        let to = try layout(shardsText, field: "shards")
        guard !fromText.isEmpty else { return .settled(to) }
        let from = try layout(fromText, field: "from")
        return from == to ? .settled(to) : .migrating(from: from, to: to)
    }

    /// Writes `state` (``TokenRegistry``'s migration does).
    func write(_ state: RegistryState, app: String) async throws(RegistryError) {
        let key = RegistryKeys.layoutKey(prefix: keyPrefix, app: app)
        var command: RedisCommand = ["HSET", key, "shards", String(state.target.shards)]
        if let from = state.source {
            command.append(contentsOf: ["from", String(from.shards)])
        }
        do {
            var commands = [command]
            if state.source == nil { commands.append(["HDEL", key, "from"]) }
            for reply in try await redis.pipeline(commands) { _ = try reply.throwingServerError() }
        } catch {
            throw RegistryError.redis(error, during: "write of \(key)", key: key)
        }
        invalidate(app: app)
    }

    /// `KEYS[1]` the layout hash, `KEYS[2]` the single-tag layout's token set; `ARGV[1]` the default
    /// shards. Returns `{shards, from}` (`from` "" when settled), creating the hash for a registry
    /// that has none: shards 1 when the single-tag set holds tokens, else the default.
    static let stateScript = RedisScript(
        """
        local held = redis.call('HMGET', KEYS[1], 'shards', 'from')
        if held[1] then return {held[1], held[2] or ''} end
        local shards = ARGV[1]
        if redis.call('EXISTS', KEYS[2]) == 1 then shards = '1' end
        redis.call('HSET', KEYS[1], 'shards', shards)
        return {shards, ''}
        """
    )
}
