public import PushCore
public import Redis

/// The registry of active device tokens in Redis: records by token, and sets of tokens by user, topic
/// and app, spread over an app's virtual shards (``RegistryLayout``, keys in ``RegistryKeys``).
///
/// Used by push-ingest (upsert, lookup, delete), push-render (which scans the sets itself) and
/// push-feedback (``deleteIfNotRegistered(since:app:token:)``, ``removeIfNotRegistered(_:now:noteLifetime:)``).
///
/// Every write is one Lua script on the device's shard, so the record and its set memberships change
/// together or not at all, and concurrent writers of one token cannot leave a token in a set its
/// record does not name. Every operation is safe to repeat after ``RegistryError/Code/unavailable`` (a
/// timeout may hide a write that happened): upserts and deletes converge on the same state.
///
/// While the app's registry moves to another layout (``RegistryState/migrating(from:to:)``), a write
/// first moves the device's data from the old layout (``moveDevice(app:device:from:to:)``), then
/// writes in the new one; a read tries the new layout first.
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
    /// Each app's layout, shared by everything in the process that reads the registry.
    public let layouts: RegistryLayouts

    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push", layouts: RegistryLayouts? = nil) {
        self.redis = redis
        self.keyPrefix = keyPrefix
        self.layouts = layouts ?? RegistryLayouts(redis: redis, keyPrefix: keyPrefix)
    }

    /// The keys of the shard where `device`'s data is written now (the target layout's).
    public func keys(app: String, device: DeviceToken) async throws(RegistryError) -> RegistryKeys {
        try await layouts.state(app: app).target.keys(prefix: keyPrefix, app: app, device: device)
    }

    /// The keys of every shard of every layout `app`'s data may be in, in scan order.
    public func allKeys(app: String) async throws(RegistryError) -> [RegistryKeys] {
        try await layouts.state(app: app).scanOrder.flatMap { $0.allKeys(prefix: keyPrefix, app: app) }
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
    ///
    /// - Parameter claim: recorded once with the write (a legacy credential, for its lifetime); when it
    ///   was recorded before, nothing is written and the answer says ``Upserted/claimedBefore``.
    public func upsert(
        app: String,
        token: DeviceToken,
        registration: DeviceRegistration,
        defaultEnvironment: AppConfiguration.Environment,
        now: Int64,
        claim: (name: String, lifetime: Duration)? = nil
    ) async throws(RegistryError) -> Upserted {
        let environment = registration.environment ?? defaultEnvironment
        let claimMilliseconds = claim.map {
            max(1, $0.lifetime.components.seconds * 1000 + $0.lifetime.components.attoseconds / 1_000_000_000_000_000)
        }
        let reply = try await writing(app: app, device: token) { keys, fence throws(RegistryError) in
            var args = [
                keys.base, token.hex, String(now), registration.user ?? "", RecordHash.topicsJSON(registration.topics), claim?.name ?? "",
                String(claimMilliseconds ?? 0),
            ]
            for (field, value) in RecordHash.fields(for: registration, environment: environment) {
                args.append(field)
                args.append(value)
            }
            return try await run(
                Self.upsertScript, keys: [keys.record(token), keys.tokens] + fence, args: args,
                operation: "upsert of \(keys.base)token:\(token.redacted)", key: keys.record(token))
        }
        let operation = "upsert of token \(token.redacted)"
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
            registeredAt: outcome >= 2 && registeredAt == 0 ? now : registeredAt,
            updatedAt: now
        )
        return Upserted(created: outcome == 1, applied: outcome < 2, claimedBefore: outcome == 3, record: record)
    }

    /// What an upsert did.
    public struct Upserted: Sendable, Equatable {
        /// The token had no record (and now has one).
        public let created: Bool
        /// False when a newer registration or deletion was already stored, or the claim was made
        /// before: nothing changed.
        public let applied: Bool
        /// The claim given was recorded before (a replayed credential): nothing changed.
        public let claimedBefore: Bool
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
        let reply = try await writing(app: app, device: token) { keys, fence throws(RegistryError) in
            try await run(
                Self.deleteScript, keys: [keys.record(token), keys.tokens] + fence,
                args: [keys.base, token.hex, String(at), String(Self.tombstoneLifetime.components.seconds)],
                operation: "delete of \(keys.base)token:\(token.redacted)", key: keys.record(token))
        }
        guard let removed = reply.integer else { throw RegistryError.unexpectedReply(reply, during: "delete of token \(token.redacted)") }
        return removed == 1
    }

    /// When `token` was last deleted (ms since 1970), while the deletion is remembered.
    public func deletedAt(app: String, token: DeviceToken) async throws(RegistryError) -> Int64? {
        var latest: Int64?
        for layout in try await layouts.state(app: app).readOrder {
            let key = layout.keys(prefix: keyPrefix, app: app, device: token).base + "gone:" + token.hex
            let reply: RedisReply
            do {
                reply = try await redis.execute("GET", key)
            } catch {
                throw RegistryError.redis(error, during: "read of \(key)", key: key)
            }
            if let at = reply.string.flatMap({ Int64($0) }) { latest = Swift.max(latest ?? at, at) }
        }
        return latest
    }

    /// CONTRACT.md's invalid-token rule: removes `token` (like ``delete(app:token:at:)``) only if it was
    /// not registered again after `timestamp`, the moment APNs reported it invalid (ms since 1970). A
    /// record updated exactly at `timestamp` is removed.
    ///
    /// - Throws: ``RegistryError/Code/corruptRecord`` when the removed record cannot be read; it is
    ///   gone all the same, so a retry answers ``DeletionOutcome/notFound``.
    public func deleteIfNotRegistered(since timestamp: Int64, app: String, token: DeviceToken) async throws(RegistryError) -> DeletionOutcome {
        var recordKey = ""
        let reply = try await writing(app: app, device: token) { keys, fence throws(RegistryError) in
            recordKey = keys.record(token)
            return try await run(
                Self.deleteIfNotRegisteredScript,
                keys: [keys.record(token), keys.tokens] + fence,
                args: [keys.base, token.hex, String(timestamp), String(Self.tombstoneLifetime.components.seconds)],
                operation: "invalid-token removal of \(keys.base)token:\(token.redacted)",
                key: keys.record(token)
            )
        }
        let operation = "invalid-token removal of token \(token.redacted)"
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
        for layout in try await layouts.state(app: app).readOrder {
            let keys = layout.keys(prefix: keyPrefix, app: app, device: token)
            let recordKey = keys.record(token)
            let reply: RedisReply
            do {
                reply = try await redis.execute("HGETALL", recordKey)
            } catch {
                throw RegistryError.redis(error, during: "lookup of \(keys.base)token:\(token.redacted)", key: recordKey)
            }
            if let record = try RecordHash.record(app: app, token: token, key: recordKey, reply: reply) { return record }
        }
        return nil
    }

    /// Whether `token` has a record (one `EXISTS` a layout; cheaper than ``record(app:token:)``).
    public func isRegistered(app: String, token: DeviceToken) async throws(RegistryError) -> Bool {
        for layout in try await layouts.state(app: app).readOrder {
            let recordKey = layout.keys(prefix: keyPrefix, app: app, device: token).record(token)
            let reply: RedisReply
            do {
                reply = try await redis.execute("EXISTS", recordKey)
            } catch {
                throw RegistryError.redis(error, during: "lookup of token \(token.redacted)", key: recordKey)
            }
            if reply.integer == 1 { return true }
        }
        return false
    }

    /// `user`'s tokens, streamed in batches over every shard (see ``TokenBatches``).
    public func tokens(app: String, user: String) async throws(RegistryError) -> TokenBatches {
        TokenBatches(redis: redis, keys: try await allKeys(app: app).map { $0.user(user) }, batchSize: Self.scanBatchSize)
    }

    /// The tokens subscribed to `topic`, streamed in batches over every shard (see ``TokenBatches``).
    public func tokens(app: String, topic: String) async throws(RegistryError) -> TokenBatches {
        TokenBatches(redis: redis, keys: try await allKeys(app: app).map { $0.topic(topic) }, batchSize: Self.scanBatchSize)
    }

    /// Every token of `app`, streamed in batches over every shard (see ``TokenBatches``).
    public func tokens(app: String) async throws(RegistryError) -> TokenBatches {
        TokenBatches(redis: redis, keys: try await allKeys(app: app).map(\.tokens), batchSize: Self.scanBatchSize)
    }

    /// How many tokens `app` has, and how many of them each shard holds (in scan order), one
    /// `SCARD` per shard.
    public func tokenCounts(app: String) async throws(RegistryError) -> [(keys: RegistryKeys, tokens: Int)] {
        let all = try await allKeys(app: app)
        let replies: [RedisReply]
        do {
            replies = try await redis.pipeline(all.map { RedisCommand(["SCARD", $0.tokens]) })
        } catch {
            throw RegistryError.redis(error, during: "count of \(app)'s tokens", key: all.first?.tokens ?? app)
        }
        return zip(all, replies).map { ($0, Int($1.integer ?? 0)) }
    }

    // MARK: Helpers

    /// Runs `write` with the keys of `device`'s shard in the layout writes go to, and the extra key
    /// the single-tag layout's scripts check (`[layout key]`, else `[]`). While migrating, the
    /// device's data is moved to the new layout first. A write the single-tag layout refused
    /// (`LAYOUT`: a migration started since the state was read) is tried again with the state read
    /// anew.
    func writing<T>(
        app: String, device: DeviceToken, _ write: (RegistryKeys, [String]) async throws(RegistryError) -> T
    ) async throws(RegistryError) -> T {
        var attempt = 0
        while true {
            let state = try await layouts.state(app: app)
            if let from = state.source {
                try await moveDevice(app: app, device: device, from: from, to: state.target)
            }
            let keys = state.target.keys(prefix: keyPrefix, app: app, device: device)
            let fence = state.target.isLegacy ? [RegistryKeys.layoutKey(prefix: keyPrefix, app: app)] : []
            do throws(RegistryError) {
                return try await write(keys, fence)
            } catch {
                guard attempt == 0, error.isLayoutRefusal else { throw error }
                layouts.invalidate(app: app)
                attempt += 1
            }
        }
    }

    func run(_ script: RedisScript, keys: [String], args: [String], operation: String, key: String) async throws(RegistryError) -> RedisReply {
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
