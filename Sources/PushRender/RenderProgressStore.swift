import PushCore
import PushServiceKit
public import Redis

/// Where push-render remembers requests in Redis: which ids are done (idempotency) and how far an
/// unfinished fan-out got (crash recovery), and which instance is working on a request (a lease, so
/// two instances never fan out one request at once).
///
/// | key | type | holds |
/// |---|---|---|
/// | `{prefix}:{<app>}:render:<request id>` | hash | `started_at` (ms, the first claim), `state` (`running`/`done`), `position` (the scan position after the last confirmed round, with the `run_id` of the server each shard's cursor belongs to: ``TargetPosition``), `sequence` (batches published so far), `tokens`, `skipped`, `updated_at` (ms) |
/// | `{prefix}:{<app>}:render:<request id>:lease` | string | the owning instance's id, with a TTL (``RenderConfiguration/leaseDuration``) |
/// | `{prefix}:{<app>}:render:<request id>:rendered` | string | 8 bytes (little-endian) for each token rendered so far, its ``TokenDeduplicator`` fingerprint; read only to resume after a Redis restart; deleted when the request is done |
/// | `{prefix}:{<app>}:render:<request id>:round` | string | the ``RoundPlan`` of the round being published: each token's mark set and slot, written before the round's batches are published, read when the request is resumed; deleted when the request is done |
///
/// Both carry the app's hash tag, so each script touches one Redis Cluster slot; the hash expires
/// ``RenderConfiguration/progressTTL`` after its last write. Every write checks the lease first, so an
/// instance that lost it (it stalled past the lease) can no longer move the position.
public struct RenderProgressStore: Sendable {
    private let redis: any RedisCommandExecutor
    public let keyPrefix: String
    public let progressTTL: Duration
    public let leaseDuration: Duration

    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push", progressTTL: Duration, leaseDuration: Duration) {
        self.redis = redis
        self.keyPrefix = keyPrefix
        self.progressTTL = progressTTL
        self.leaseDuration = leaseDuration
    }

    public func progressKey(app: String, requestID: String) -> String {
        RequestReports.progressKey(prefix: keyPrefix, app: app, requestID: requestID)
    }
    public func leaseKey(app: String, requestID: String) -> String { progressKey(app: app, requestID: requestID) + ":lease" }
    public func renderedKey(app: String, requestID: String) -> String { progressKey(app: app, requestID: requestID) + ":rendered" }
    public func roundPlanKey(app: String, requestID: String) -> String { progressKey(app: app, requestID: requestID) + ":round" }

    /// Records the plan of the round about to be published, replacing the previous round's, if
    /// `owner` still holds the lease (like every write here: an instance that stalled past its lease
    /// must neither overwrite the new owner's plan nor publish the round).
    ///
    /// - Returns: false when another instance holds the lease; nothing was written.
    func saveRoundPlan(app: String, requestID: String, owner: String, plan: RoundPlan) async throws(RedisError) -> Bool {
        let reply = try await redis.evalScript(
            Self.saveRoundPlanScript,
            keys: [Array(roundPlanKey(app: app, requestID: requestID).utf8), Array(leaseKey(app: app, requestID: requestID).utf8)],
            args: [Array(owner.utf8), Array(String(Swift.max(1, Self.milliseconds(progressTTL) / 1000)).utf8), plan.encoded])
        return reply.integer == 1
    }

    /// `KEYS[1]` the round plan, `KEYS[2]` the lease; `ARGV[1]` owner, `ARGV[2]` TTL s, `ARGV[3]` the
    /// plan's bytes. Returns 1, or 0 when another owner holds the lease.
    static let saveRoundPlanScript = RedisScript(
        """
        local holder = redis.call('GET', KEYS[2])
        if holder and holder ~= ARGV[1] then return 0 end
        redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[2])
        return 1
        """
    )

    /// The plan of the last round published (or being published), if any and readable.
    func roundPlan(app: String, requestID: String) async throws(RedisError) -> RoundPlan? {
        let reply = try await redis.execute(RedisCommand(["GET", roundPlanKey(app: app, requestID: requestID)]))
        guard let bytes = reply.bytes else { return nil }
        return RoundPlan(encoded: bytes)
    }

    /// Appends the fingerprints of a round's rendered tokens (one `APPEND`, 8 bytes a token).
    public func appendRendered(app: String, requestID: String, fingerprints: [UInt64]) async throws(RedisError) {
        guard !fingerprints.isEmpty else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(fingerprints.count * 8)
        for fingerprint in fingerprints {
            withUnsafeBytes(of: fingerprint.littleEndian) { bytes.append(contentsOf: $0) }
        }
        let key = renderedKey(app: app, requestID: requestID)
        var append: RedisCommand = ["APPEND", key]
        append.append(bytes)
        var expire: RedisCommand = ["EXPIRE", key]
        expire.append(Swift.max(1, Self.milliseconds(progressTTL) / 1000))
        for reply in try await redis.pipeline([append, expire]) { _ = try reply.throwingServerError() }
    }

    /// The fingerprints of every token rendered so far for the request.
    public func rendered(app: String, requestID: String) async throws(RedisError) -> [UInt64] {
        let reply = try await redis.execute(RedisCommand(["GET", renderedKey(app: app, requestID: requestID)]))
        guard let bytes = reply.bytes else { return [] }
        var fingerprints: [UInt64] = []
        fingerprints.reserveCapacity(bytes.count / 8)
        var index = 0
        while index + 8 <= bytes.count {
            var value: UInt64 = 0
            for offset in 0..<8 { value |= UInt64(bytes[index + offset]) << (8 * UInt64(offset)) }
            fingerprints.append(value)
            index += 8
        }
        return fingerprints
    }

    /// What ``claim(app:requestID:owner:)`` found.
    public enum Claim: Sendable, Equatable {
        /// The request was rendered before: ack it and do nothing.
        case done
        /// Another instance holds the lease.
        case busy
        /// Ours now: start at `progress` (fresh: position nil, sequence 0).
        case claimed(RenderProgress)
    }

    /// Takes the request's lease for `owner` unless the request is done or someone else holds it.
    /// A lease held under `instancePrefix` (an earlier delivery to this same process, which let go of
    /// the request but could not release the lease, e.g. while Redis was down) counts as ours: the
    /// caller makes sure no other copy runs here (``PushServiceKit/KeyedLocks``).
    ///
    /// A request claimed for the first time gets `started_at` (`now`, ms) in its progress record and a
    /// place in the app's recent requests (``PushServiceKit/RequestReports``).
    public func claim(
        app: String, requestID: String, owner: String, instancePrefix: String? = nil, now: Int64 = 0
    ) async throws(RedisError) -> Claim {
        let reply = try await redis.evalScript(
            Self.claimScript,
            keys: [
                progressKey(app: app, requestID: requestID), leaseKey(app: app, requestID: requestID),
                RequestReports.recentKey(prefix: keyPrefix, app: app), RequestReports.reportKey(prefix: keyPrefix, app: app, requestID: requestID),
            ],
            args: [
                owner, String(Self.milliseconds(leaseDuration)), instancePrefix ?? owner, String(now),
                String(Swift.max(1, Self.milliseconds(progressTTL) / 1000)), requestID, String(RequestReports.recentLimit),
            ]
        )
        guard let elements = reply.array, let kind = elements.first?.string else {
            throw RedisError(.protocolError, "unexpected reply to the render claim script: \(reply)")
        }
        switch kind {
        case "done": return .done
        case "busy": return .busy
        case "claimed":
            var hash: [String: String] = [:]
            if elements.count > 1, let fields = elements[1].array {
                var index = 0
                while index + 1 < fields.count {
                    if let field = fields[index].string, let value = fields[index + 1].string { hash[field] = value }
                    index += 2
                }
            }
            return .claimed(RenderProgress(hash: hash))
        default:
            throw RedisError(.protocolError, "unexpected reply to the render claim script: \(reply)")
        }
    }

    /// Records `progress` after a confirmed round (or `done` at the end) and renews the lease.
    ///
    /// - Returns: false when `owner` no longer holds the lease or the request is already done (another
    ///   instance finished it); nothing was written then.
    public func save(app: String, requestID: String, owner: String, progress: RenderProgress, now: Int64) async throws(RedisError) -> Bool {
        var args = [owner, String(Self.milliseconds(leaseDuration)), String(Self.milliseconds(progressTTL) / 1000), progress.isDone ? "1" : "0"]
        for (field, value) in progress.fields(now: now) {
            args.append(field)
            args.append(value)
        }
        let reply = try await redis.evalScript(
            Self.saveScript,
            keys: [
                progressKey(app: app, requestID: requestID), leaseKey(app: app, requestID: requestID), renderedKey(app: app, requestID: requestID),
                roundPlanKey(app: app, requestID: requestID),
            ],
            args: args
        )
        return reply.integer == 1
    }

    /// Gives the lease up (when stopping mid-request), so the redelivered request can be resumed at once.
    public func release(app: String, requestID: String, owner: String) async throws(RedisError) {
        try await redis.evalScript(Self.releaseScript, keys: [leaseKey(app: app, requestID: requestID)], args: [owner])
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// `KEYS[1]` progress hash, `KEYS[2]` lease, `KEYS[3]` the app's recent requests, `KEYS[4]` the
    /// request's report (a `dead` mark of an earlier, invalid copy of the id is dropped); `ARGV[1]` owner,
    /// `ARGV[2]` lease ms, `ARGV[3]` a prefix of owners that count as this owner, `ARGV[4]` now (ms),
    /// `ARGV[5]` the progress TTL s, `ARGV[6]` the request id, `ARGV[7]` how many ids the recent list keeps.
    static let claimScript = RedisScript(
        """
        if redis.call('HGET', KEYS[1], 'state') == 'done' then return {'done'} end
        local holder = redis.call('GET', KEYS[2])
        if holder and holder ~= ARGV[1] and string.sub(holder, 1, #ARGV[3]) ~= ARGV[3] then return {'busy'} end
        redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
        if redis.call('HSETNX', KEYS[1], 'started_at', ARGV[4]) == 1 then
          redis.call('EXPIRE', KEYS[1], ARGV[5])
          redis.call('ZADD', KEYS[3], 'NX', ARGV[4], ARGV[6])
          redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -tonumber(ARGV[7]) - 1)
          redis.call('EXPIRE', KEYS[3], ARGV[5])
          redis.call('HDEL', KEYS[4], 'dead')
        end
        return {'claimed', redis.call('HGETALL', KEYS[1])}
        """
    )

    /// `KEYS[1]` progress hash, `KEYS[2]` lease, `KEYS[3]` rendered fingerprints and `KEYS[4]` the
    /// round plan (both dropped when done);
    /// `ARGV[1]` owner, `ARGV[2]` lease ms, `ARGV[3]` TTL s,
    /// `ARGV[4]` done (1/0), `ARGV[5…]` field/value pairs. Returns 1, or 0 when the request is already
    /// done or another owner holds the lease (an expired lease nobody took is simply ours again).
    static let saveScript = RedisScript(
        """
        if redis.call('HGET', KEYS[1], 'state') == 'done' then return 0 end
        local holder = redis.call('GET', KEYS[2])
        if holder and holder ~= ARGV[1] then return 0 end
        local fields = {}
        for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
        redis.call('HSET', KEYS[1], unpack(fields))
        redis.call('EXPIRE', KEYS[1], ARGV[3])
        if ARGV[4] == '1' then
          redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
        else
          redis.call('PEXPIRE', KEYS[2], ARGV[2])
        end
        return 1
        """
    )

    /// `KEYS[1]` lease; `ARGV[1]` owner.
    static let releaseScript = RedisScript(
        """
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0
        """
    )
}

/// How far a request's fan-out got: the position after the last confirmed round and the counts so far.
public struct RenderProgress: Sendable, Equatable {
    /// Where the next round starts; nil before the first round.
    public var position: TargetPosition?
    /// Batches published so far; the next batch is `<id>/<sequence + 1>`.
    public var sequence: Int
    public var tokens: Int
    public var skipped: Int
    public var isDone: Bool

    public init(
        position: TargetPosition? = nil, sequence: Int = 0, tokens: Int = 0, skipped: Int = 0, isDone: Bool = false
    ) {
        self.position = position
        self.sequence = sequence
        self.tokens = tokens
        self.skipped = skipped
        self.isDone = isDone
    }

    init(hash: [String: String]) {
        self.init(
            // `scan_epoch`: the one run_id positions kept beside them before sharding.
            position: hash["position"].flatMap { TargetPosition(encoded: $0, legacyEpoch: hash["scan_epoch"]) },
            sequence: hash["sequence"].flatMap(Int.init) ?? 0,
            tokens: hash["tokens"].flatMap(Int.init) ?? 0,
            skipped: hash["skipped"].flatMap(Int.init) ?? 0,
            isDone: hash["state"] == "done"
        )
    }

    func fields(now: Int64) -> [(String, String)] {
        var fields: [(String, String)] = [
            ("state", isDone ? "done" : "running"),
            ("sequence", String(sequence)),
            ("tokens", String(tokens)),
            ("skipped", String(skipped)),
            ("updated_at", String(now)),
        ]
        if let position { fields.append(("position", position.encoded)) }
        return fields
    }
}
