public import PushCore
public import Redis

/// The request reports in Redis (``PushCore/RequestReport`` describes the fields): written by
/// push-render, push-send and push-feedback in the round trips they already make, read by the console
/// and `pushctl request`.
///
/// | key | type | holds |
/// |---|---|---|
/// | `{prefix}:{<app>}:report:<request id>` | hash | the report's fields; expires ``ttl`` after its last write |
/// | `{prefix}:{<app>}:report:<request id>:removed` | set | the tokens push-feedback removed as invalid; expires like the hash |
/// | `{prefix}:{<app>}:requests` | sorted set | the app's recent request ids, scored by when they were first seen (ms); the newest ``recentLimit`` |
/// | `{prefix}:{<app>}:render:<request id>` | hash | push-render's progress record (read only here) |
///
/// Every key carries the app's hash tag, so each script touches one Redis Cluster slot. A report write
/// that fails is the caller's to log: reports never hold up delivery.
public struct RequestReports: Sendable {
    private let redis: any RedisCommandExecutor
    public let keyPrefix: String
    public let ttl: Duration

    /// How many request ids each app's recent list keeps.
    public static let recentLimit = 1000
    /// The default of `PUSH_REPORT_TTL_S`: as long as push-render remembers a request id.
    public static let defaultTTL: Duration = .seconds(7 * 24 * 3600)

    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push", ttl: Duration = RequestReports.defaultTTL) {
        self.redis = redis
        self.keyPrefix = keyPrefix
        self.ttl = ttl
    }

    public static func reportKey(prefix: String, app: String, requestID: String) -> String { "\(prefix):{\(app)}:report:\(requestID)" }
    public static func recentKey(prefix: String, app: String) -> String { "\(prefix):{\(app)}:requests" }
    public static func progressKey(prefix: String, app: String, requestID: String) -> String { "\(prefix):{\(app)}:render:\(requestID)" }

    public func reportKey(app: String, requestID: String) -> String { Self.reportKey(prefix: keyPrefix, app: app, requestID: requestID) }
    public func recentKey(app: String) -> String { Self.recentKey(prefix: keyPrefix, app: app) }
    public func removedKey(app: String, requestID: String) -> String { reportKey(app: app, requestID: requestID) + ":removed" }

    var ttlSeconds: Int64 { Swift.max(1, ttl.components.seconds) }

    // MARK: Writing

    /// A request was published (console, `pushctl publish`): `queued_at`, and the recent list.
    public func recordQueued(app: String, requestID: String, now: Int64) async throws(RedisError) {
        _ = try await redis.evalScript(
            Self.noteScript, keys: [reportKey(app: app, requestID: requestID), recentKey(app: app)],
            args: ["queued_at", String(now), String(ttlSeconds), requestID, String(now), String(Self.recentLimit)])
    }

    /// push-render dead-lettered the request: its reason, and the recent list; nothing when push-render
    /// took a valid request of this id before (an invalid copy does not make it dead).
    public func recordDead(app: String, requestID: String, reason: String, now: Int64) async throws(RedisError) {
        _ = try await redis.evalScript(
            Self.noteScript,
            keys: [
                reportKey(app: app, requestID: requestID), recentKey(app: app), Self.progressKey(prefix: keyPrefix, app: app, requestID: requestID),
            ],
            args: ["dead", String(reason.prefix(1000)), String(ttlSeconds), requestID, String(now), String(Self.recentLimit)])
    }

    /// `KEYS[1]` report, `KEYS[2]` recent list, `KEYS[3]` (optional) the progress record whose existence
    /// makes the note moot; `ARGV[1]` field, `ARGV[2]` value (set if absent), `ARGV[3]` TTL s, `ARGV[4]`
    /// request id, `ARGV[5]` score (ms), `ARGV[6]` how many ids the list keeps.
    static let noteScript = RedisScript(
        """
        if #KEYS > 2 and redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
        redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
        redis.call('EXPIRE', KEYS[1], ARGV[3])
        redis.call('ZADD', KEYS[2], 'NX', ARGV[5], ARGV[4])
        redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -tonumber(ARGV[6]) - 1)
        redis.call('EXPIRE', KEYS[2], ARGV[3])
        return 1
        """
    )

    /// What push-send learned from one settled batch.
    public struct SettledBatch: Sendable, Equatable {
        public var requestID: String
        /// The batch's mark set, and how many of its tokens APNs has accepted by now (its marks).
        public var markSet: String
        public var accepted: Int
        /// `<batch id>#<fingerprint of its tokens>`: one field per copy of a batch, so a redelivered
        /// copy replaces its earlier tally instead of adding to it.
        public var batchKey: String
        public var tally: BatchTally
        /// Tokens of the mark set (for a batch push-render made: its tokens; nil for a retry, whose
        /// original batch counted them).
        public var tokens: Int?
        /// When this batch delivered something (ms; nil: nothing), for the first and last delivery times.
        public var deliveredAt: Int64?

        public init(
            requestID: String, markSet: String, accepted: Int, batchKey: String, tally: BatchTally, tokens: Int? = nil, deliveredAt: Int64?
        ) {
            self.requestID = requestID
            self.markSet = markSet
            self.accepted = accepted
            self.batchKey = batchKey
            self.tally = tally
            self.tokens = tokens
            self.deliveredAt = deliveredAt
        }
    }

    /// Records settled batches of `app` in one pipeline (one script call per batch).
    public func recordSettled(app: String, batches: [SettledBatch]) async throws(RedisError) {
        guard !batches.isEmpty else { return }
        var commands: [RedisCommand] = []
        for batch in batches {
            var command: RedisCommand = ["EVALSHA", Self.settledScript.sha1, "1", reportKey(app: app, requestID: batch.requestID)]
            for argument in [
                "m:\(batch.markSet)", String(batch.accepted), "b:\(batch.batchKey)", batch.tally.encoded, batch.deliveredAt.map(String.init) ?? "",
                String(ttlSeconds), "n:\(batch.markSet)", batch.tokens.map(String.init) ?? "",
            ] {
                command.append(argument)
            }
            commands.append(command)
        }
        for reply in try await redis.pipelineScript(Self.settledScript, commands) { _ = try reply.throwingServerError() }
    }

    /// `KEYS[1]` report; `ARGV[1]` mark-set field, `ARGV[2]` accepted (kept if larger), `ARGV[3]`
    /// batch field, `ARGV[4]` its tally (empty: removed), `ARGV[5]` delivery time ms (empty: none),
    /// `ARGV[6]` TTL s, `ARGV[7]` the mark set's token-count field, `ARGV[8]` its tokens (empty: leave).
    ///
    /// It also keeps the running totals `t:delivered`, `t:sent`, `t:failed`, `t:retried` and
    /// `t:deferred` by the change each field makes, so a list of reports reads a few fields, not a
    /// hash of three fields a batch (``summaries(app:requestIDs:)``).
    static let settledScript = RedisScript(
        """
        local function sums(tally)
          local f, r, d = 0, 0, 0
          if not tally then return 0, 0, 0 end
          for n in string.gmatch(tally, 'f%.[^=;]*=(%d+)') do f = f + tonumber(n) end
          local rr = string.match(';' .. tally, ';r=(%d+)')
          if rr then r = tonumber(rr) end
          local dd = string.match(';' .. tally, ';d=(%d+)')
          if dd then d = tonumber(dd) end
          return f, r, d
        end
        local seen = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') or 0
        local accepted = tonumber(ARGV[2])
        if accepted > seen then
          redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
          redis.call('HINCRBY', KEYS[1], 't:delivered', accepted - seen)
        end
        local of, orr, od = sums(redis.call('HGET', KEYS[1], ARGV[3]) or nil)
        local nf, nr, nd = sums(ARGV[4])
        if ARGV[4] == '' then redis.call('HDEL', KEYS[1], ARGV[3]) else redis.call('HSET', KEYS[1], ARGV[3], ARGV[4]) end
        if nf ~= of then redis.call('HINCRBY', KEYS[1], 't:failed', nf - of) end
        if nr ~= orr then redis.call('HINCRBY', KEYS[1], 't:retried', nr - orr) end
        if nd ~= od then redis.call('HINCRBY', KEYS[1], 't:deferred', nd - od) end
        if ARGV[5] ~= '' then
          local at = tonumber(ARGV[5])
          local first = tonumber(redis.call('HGET', KEYS[1], 'first') or '')
          if not first or at < first then redis.call('HSET', KEYS[1], 'first', ARGV[5]) end
          local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '')
          if not last or at > last then redis.call('HSET', KEYS[1], 'last', ARGV[5]) end
        end
        if ARGV[8] ~= '' then
          local before = tonumber(redis.call('HGET', KEYS[1], ARGV[7]) or '0') or 0
          redis.call('HSET', KEYS[1], ARGV[7], ARGV[8])
          local tokens = tonumber(ARGV[8])
          if tokens ~= before then redis.call('HINCRBY', KEYS[1], 't:sent', tokens - before) end
        end
        redis.call('EXPIRE', KEYS[1], ARGV[6])
        return 1
        """
    )

    /// push-feedback removed (or found removed) these tokens, reported invalid by `requestID`'s sends.
    public func recordRemoved(_ removals: [(app: String, requestID: String, token: String)]) async throws(RedisError) {
        guard !removals.isEmpty else { return }
        var commands: [RedisCommand] = []
        for removal in removals {
            let key = removedKey(app: removal.app, requestID: removal.requestID)
            commands.append(RedisCommand(["SADD", key, removal.token]))
            var expire: RedisCommand = ["EXPIRE", key]
            expire.append(ttlSeconds)
            commands.append(expire)
        }
        for reply in try await redis.pipeline(commands) { _ = try reply.throwingServerError() }
    }

    // MARK: Reading

    /// The report of `requestID` of `app`; nil when nothing is known of it (never seen, or expired).
    public func report(app: String, requestID: String) async throws(RedisError) -> RequestReport? {
        try await reports(app: app, requestIDs: [requestID]).first
    }

    /// The reports of `requestIDs` of `app` in one pipeline, in order; the unknown or expired are left out.
    public func reports(app: String, requestIDs: [String]) async throws(RedisError) -> [RequestReport] {
        guard !requestIDs.isEmpty else { return [] }
        var commands: [RedisCommand] = []
        for id in requestIDs {
            commands.append(RedisCommand(["HGETALL", Self.progressKey(prefix: keyPrefix, app: app, requestID: id)]))
            commands.append(RedisCommand(["HGETALL", reportKey(app: app, requestID: id)]))
            commands.append(RedisCommand(["SCARD", removedKey(app: app, requestID: id)]))
        }
        let replies = try await redis.pipeline(commands)
        guard replies.count == commands.count else {
            throw RedisError(.protocolError, "report: \(replies.count) replies to \(commands.count) commands")
        }
        var found: [RequestReport] = []
        for (index, id) in requestIDs.enumerated() {
            let progress = try Self.hash(replies[3 * index].throwingServerError())
            let report = try Self.hash(replies[3 * index + 1].throwingServerError())
            let removed = Int(clamping: try replies[3 * index + 2].throwingServerError().integer ?? 0)
            if let assembled = RequestReport(id: id, app: app, progress: progress, report: report, removedTokens: removed) { found.append(assembled) }
        }
        return found
    }

    /// The report fields a summary reads: everything but the per-batch ones.
    static let summaryFields = ["queued_at", "dead", "first", "last", "t:delivered", "t:sent", "t:failed", "t:retried", "t:deferred"]

    /// Summaries of the reports of `requestIDs` of `app` (the running totals instead of the per-batch
    /// fields: no failures by reason), in one pipeline, in order; the unknown are left out. What the
    /// console's request list reads every few seconds.
    public func summaries(app: String, requestIDs: [String]) async throws(RedisError) -> [RequestReport] {
        guard !requestIDs.isEmpty else { return [] }
        var commands: [RedisCommand] = []
        for id in requestIDs {
            commands.append(RedisCommand(["HGETALL", Self.progressKey(prefix: keyPrefix, app: app, requestID: id)]))
            commands.append(RedisCommand(["HMGET", reportKey(app: app, requestID: id)] + Self.summaryFields))
            commands.append(RedisCommand(["SCARD", removedKey(app: app, requestID: id)]))
        }
        let replies = try await redis.pipeline(commands)
        guard replies.count == commands.count else {
            throw RedisError(.protocolError, "summary: \(replies.count) replies to \(commands.count) commands")
        }
        var found: [RequestReport] = []
        for (index, id) in requestIDs.enumerated() {
            let progress = try Self.hash(replies[3 * index].throwingServerError())
            let values = try replies[3 * index + 1].throwingServerError().array ?? []
            var report: [String: String] = [:]
            for (field, value) in zip(Self.summaryFields, values) { if let text = value.string { report[field] = text } }
            let removed = Int(clamping: try replies[3 * index + 2].throwingServerError().integer ?? 0)
            if let assembled = RequestReport(id: id, app: app, progress: progress, report: report, removedTokens: removed) { found.append(assembled) }
        }
        return found
    }

    /// The newest `limit` request ids of `app` with when they were first seen (ms), newest first.
    public func recent(app: String, limit: Int) async throws(RedisError) -> [(id: String, at: Int64)] {
        var command: RedisCommand = ["ZREVRANGE", recentKey(app: app), "0"]
        command.append(Swift.max(0, Swift.min(limit, Self.recentLimit) - 1))
        command.append("WITHSCORES")
        let elements = try await redis.execute(command).array ?? []
        var recent: [(id: String, at: Int64)] = []
        var index = 0
        while index + 1 < elements.count {
            if let id = elements[index].string, let score = elements[index + 1].string.flatMap(Double.init), score.isFinite {
                recent.append((id, Int64(Swift.max(0, Swift.min(score, 9e15)))))
            }
            index += 2
        }
        return recent
    }

    static func hash(_ reply: RedisReply) throws(RedisError) -> [String: String] {
        guard let elements = reply.array else {
            if reply.isNull { return [:] }
            throw RedisError(.protocolError, "HGETALL: unexpected reply \(reply)")
        }
        var hash: [String: String] = [:]
        var index = 0
        while index + 1 < elements.count {
            if let field = elements[index].string, let value = elements[index + 1].string { hash[field] = value }
            index += 2
        }
        return hash
    }
}
