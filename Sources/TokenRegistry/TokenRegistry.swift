public import PushCore
public import Redis

/// The registry of active device tokens in Redis: records by token, and sets of tokens by user, topic
/// and app (layout in ``RegistryKeys``).
///
/// Used by push-ingest (upsert, lookup, delete), push-render (streaming ``tokens(app:user:)``,
/// ``tokens(app:topic:)``, ``tokens(app:)``) and push-feedback (``deleteIfNotRegistered(since:app:token:)``).
///
/// Every write is one Lua script, so the record and its set memberships change together or not at
/// all, and concurrent writers of one token cannot leave a token in a set its record does not name.
/// Every operation is safe to repeat after ``RegistryError/Code/unavailable`` (a timeout may hide a
/// write that happened): upserts and deletes converge on the same state.
///
/// Calls are bounded by the Redis client's command timeout (plus one connect timeout while Redis is
/// unreachable); none waits longer.
public struct TokenRegistry: Sendable {
    /// Tokens per `SSCAN` page: large enough that a million-token broadcast is a few thousand round
    /// trips, small enough that each reply stays far below a megabyte and Redis is never blocked long.
    public static let scanBatchSize = 500

    /// How long a deletion is remembered (`<base>gone:<token>`): longer than any redelivery of a
    /// registration (retry tiers are minutes) and than the oldest `registered_at` a queue message may
    /// carry (``RegistrationEventTime/maximumAge``), so a late registration from before the deletion
    /// cannot revive the device.
    public static let tombstoneLifetime: Duration = .seconds(8 * 24 * 3600)

    let redis: any RedisCommandExecutor
    /// The first part of every key: `push` in production (CONTRACT.md); tests use their own.
    public let keyPrefix: String

    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push") {
        self.redis = redis
        self.keyPrefix = keyPrefix
    }

    /// The keys of `app`'s registry.
    public func keys(app: String) -> RegistryKeys {
        RegistryKeys(prefix: keyPrefix, app: app)
    }

    // MARK: Writing

    /// Stores `registration` as `token`'s record, replacing the old one whole, and moves the token
    /// between user and topic sets to match — if it is the newest thing that happened to the token:
    /// a registration older than the stored one, or than a deletion of the token, changes nothing
    /// (``Upserted/applied`` is false), whatever order redeliveries bring them in.
    ///
    /// - Parameters:
    ///   - defaultEnvironment: the app's environment, for a registration that names none.
    ///   - now: when the registration happened (ms since 1970): the HTTP request's receipt or the
    ///     producer's `registered_at`; becomes `updated_at`, and `registered_at` when the token is new.
    /// - Returns: whether it was applied and the token new, and the record as it would be stored.
    public func upsert(
        app: String,
        token: DeviceToken,
        registration: DeviceRegistration,
        defaultEnvironment: AppConfiguration.Environment,
        now: Int64
    ) async throws(RegistryError) -> Upserted {
        let keys = keys(app: app)
        let recordKey = keys.record(token)
        let environment = registration.environment ?? defaultEnvironment
        var args = [keys.base, token.hex, String(now), registration.user ?? "", RecordHash.topicsJSON(registration.topics)]
        for (field, value) in RecordHash.fields(for: registration, environment: environment) {
            args.append(field)
            args.append(value)
        }
        let operation = "upsert of \(keys.base)token:\(token.redacted)"
        let reply = try await run(Self.upsertScript, keys: [recordKey, keys.tokens], args: args, operation: operation, key: recordKey)
        guard let elements = reply.array, elements.count == 2, let outcome = elements[0].integer,
            let registeredAt = elements[1].integer
        else {
            throw RegistryError.unexpectedReply(reply, during: operation)
        }
        let record = DeviceRecord(
            app: app,
            token: token,
            user: registration.user,
            locale: registration.locale,
            environment: environment,
            topics: registration.topics,
            device: registration.device,
            settings: registration.settings,
            registeredAt: outcome == 2 && registeredAt == 0 ? now : registeredAt,
            updatedAt: now
        )
        return Upserted(created: outcome == 1, applied: outcome != 2, record: record)
    }

    /// What an upsert did.
    public struct Upserted: Sendable, Equatable {
        /// The token had no record (and now has one).
        public let created: Bool
        /// False when a newer registration or deletion was already stored: nothing changed.
        public let applied: Bool
        /// The record as this registration stores it (as it would have, when not applied).
        public let record: DeviceRecord
    }

    /// Removes `token`'s record and its user, topic and app set memberships, and remembers the
    /// deletion for ``tombstoneLifetime`` so that an older registration arriving late cannot revive
    /// the device. A record registered after `at` stays: the deletion is older news.
    ///
    /// - Parameter at: when the deletion happened (ms since 1970).
    /// - Returns: whether a record was removed.
    @discardableResult
    public func delete(app: String, token: DeviceToken, at: Int64) async throws(RegistryError) -> Bool {
        let keys = keys(app: app)
        let recordKey = keys.record(token)
        let operation = "delete of \(keys.base)token:\(token.redacted)"
        let reply = try await run(
            Self.deleteScript, keys: [recordKey, keys.tokens],
            args: [keys.base, token.hex, String(at), String(Self.tombstoneLifetime.components.seconds)], operation: operation,
            key: recordKey)
        guard let removed = reply.integer else { throw RegistryError.unexpectedReply(reply, during: operation) }
        return removed == 1
    }

    /// Records `name` for `app` for `lifetime` unless it is recorded already: true the first time.
    /// push-ingest claims each legacy credential once, so a captured request cannot be replayed.
    public func claimOnce(_ name: String, app: String, lifetime: Duration) async throws(RegistryError) -> Bool {
        let key = keys(app: app).base + "once:" + name
        let milliseconds = max(1, lifetime.components.seconds * 1000 + lifetime.components.attoseconds / 1_000_000_000_000_000)
        let reply: RedisReply
        do {
            reply = try await redis.execute("SET", key, "1", "NX", "PX", String(milliseconds))
        } catch {
            throw RegistryError.redis(error, during: "claim of \(keys(app: app).base)once:…", key: key)
        }
        if let message = reply.errorMessage { throw RegistryError.unexpectedReply(reply, during: "claim (\(message))") }
        return reply.string == "OK"
    }

    /// When `token` was last deleted (ms since 1970), while the deletion is remembered.
    public func deletedAt(app: String, token: DeviceToken) async throws(RegistryError) -> Int64? {
        let key = keys(app: app).base + "gone:" + token.hex
        let reply: RedisReply
        do {
            reply = try await redis.execute("GET", key)
        } catch {
            throw RegistryError.redis(error, during: "read of \(key)", key: key)
        }
        return reply.string.flatMap { Int64($0) }
    }

    /// CONTRACT.md's invalid-token rule: removes `token` (like ``delete(app:token:)``) only if it was not
    /// registered again after `timestamp`, the moment APNs reported it invalid (ms since 1970). A
    /// record updated exactly at `timestamp` is removed.
    ///
    /// - Throws: ``RegistryError/Code/corruptRecord`` when the removed record cannot be read; it is
    ///   gone all the same, so a retry answers ``DeletionOutcome/notFound``.
    public func deleteIfNotRegistered(since timestamp: Int64, app: String, token: DeviceToken) async throws(RegistryError) -> DeletionOutcome {
        let keys = keys(app: app)
        let recordKey = keys.record(token)
        let operation = "invalid-token removal of \(keys.base)token:\(token.redacted)"
        let reply = try await run(
            Self.deleteIfNotRegisteredScript,
            keys: [recordKey, keys.tokens],
            args: [keys.base, token.hex, String(timestamp), String(Self.tombstoneLifetime.components.seconds)],
            operation: operation,
            key: recordKey
        )
        guard let elements = reply.array, let kind = elements.first?.integer else {
            throw RegistryError.unexpectedReply(reply, during: operation)
        }
        switch (kind, elements.count) {
        case (0, 1):
            return .notFound
        case (1, 2):
            guard let updatedAt = elements[1].integer else {
                throw RegistryError.corrupt(key: recordKey, field: "updated_at", "must be ms since 1970, got \(elements[1])")
            }
            return .keptRegisteredAfter(updatedAt)
        case (2, 2):
            guard let record = try RecordHash.record(app: app, token: token, key: recordKey, reply: elements[1]) else {
                throw RegistryError.unexpectedReply(reply, during: operation)
            }
            return .removed(record)
        default:
            throw RegistryError.unexpectedReply(reply, during: operation)
        }
    }

    // MARK: Reading

    /// `token`'s record, or nil when it is not registered.
    ///
    /// - Throws: ``RegistryError/Code/corruptRecord`` naming the key and field when the stored hash is
    ///   not one this module wrote.
    public func record(app: String, token: DeviceToken) async throws(RegistryError) -> DeviceRecord? {
        let recordKey = keys(app: app).record(token)
        let reply: RedisReply
        do {
            reply = try await redis.execute("HGETALL", recordKey)
        } catch {
            throw RegistryError.redis(error, during: "lookup of \(keys(app: app).base)token:\(token.redacted)", key: recordKey)
        }
        return try RecordHash.record(app: app, token: token, key: recordKey, reply: reply)
    }

    /// `user`'s tokens, streamed in batches (see ``TokenBatches``).
    public func tokens(app: String, user: String) -> TokenBatches {
        TokenBatches(redis: redis, key: keys(app: app).user(user), batchSize: Self.scanBatchSize)
    }

    /// The tokens subscribed to `topic`, streamed in batches (see ``TokenBatches``).
    public func tokens(app: String, topic: String) -> TokenBatches {
        TokenBatches(redis: redis, key: keys(app: app).topic(topic), batchSize: Self.scanBatchSize)
    }

    /// Every token of `app`, streamed in batches (see ``TokenBatches``).
    public func tokens(app: String) -> TokenBatches {
        TokenBatches(redis: redis, key: keys(app: app).tokens, batchSize: Self.scanBatchSize)
    }

    // MARK: Helpers

    private func run(_ script: RedisScript, keys: [String], args: [String], operation: String, key: String) async throws(RegistryError) -> RedisReply
    {
        do {
            return try await redis.evalScript(script, keys: keys, args: args)
        } catch {
            throw RegistryError.redis(error, during: operation, key: key)
        }
    }
}

/// What ``TokenRegistry/deleteIfNotRegistered(since:app:token:)`` did.
public enum DeletionOutcome: Sendable, Equatable {
    /// The record was removed (with its set memberships); this is what it held.
    case removed(DeviceRecord)
    /// The token was registered again after the given moment, at this time (ms since 1970): kept.
    case keptRegisteredAfter(Int64)
    /// There was no record for the token.
    case notFound
}
