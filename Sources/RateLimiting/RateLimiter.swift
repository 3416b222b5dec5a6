public import Redis

/// Rate limits shared by every instance of a service, kept in Redis: one atomic Lua script per check
/// implementing ``GCRA``.
///
/// The script reads the clock with Redis `TIME`, so many ingest or send instances with skewed clocks
/// still share one timeline; and it sets the key to expire when its state would be idle again (at
/// most `burst × period / limit`, i.e. the period when `burst` is the default), so keys of clients
/// that went away vanish on their own.
///
/// Keys are the caller's (e.g. `push:ratelimit:{com.example.game}:ingest:203.0.113.7`); put the
/// scope's hash tag in them when running on Redis Cluster.
public struct RateLimiter: Sendable {
    let redis: any RedisCommandExecutor

    public init(redis: any RedisCommandExecutor) {
        self.redis = redis
    }

    /// Spends `cost` units of `key`'s allowance of `limit` per `period`, with bursts of up to `burst`
    /// (default `limit`), if the allowance has them; a refused request spends nothing.
    ///
    /// - Precondition: `limit ≥ 1`, `period > 0`, `burst ≥ 1` and `0 ≤ cost ≤ burst` (a larger cost
    ///   could never be allowed). `cost: 0` peeks without spending.
    /// - Throws: the Redis client's error; callers decide whether to fail open or closed.
    public func check(key: String, limit: Int, period: Duration, burst: Int? = nil, cost: Int = 1) async throws(RedisError) -> RateLimitDecision {
        let gcra = GCRA(limit: limit, period: period, burst: burst)
        precondition(cost >= 0 && Int64(cost) * gcra.interval <= gcra.tolerance, "a rate-limit cost must be within 0...burst, got \(cost)")
        let reply = try await redis.evalScript(
            Self.script,
            keys: [key],
            args: [String(gcra.interval), String(gcra.tolerance), String(cost)]
        )
        return try Self.decision(reply, key: key)
    }

    /// Several limits at once, in one pipeline: one round trip to Redis however many scopes a request
    /// is limited by (push-ingest: the client address and the app). Each key is decided and spent on
    /// its own, exactly as separate ``check(key:limit:period:burst:cost:)`` calls would: a request
    /// refused by one limit still spends the others' allowance when they allow it.
    ///
    /// - Returns: one decision per limit, in order.
    /// - Throws: the Redis client's error when the pipeline failed or any check got an error reply.
    public func check(_ limits: [RateLimit]) async throws(RedisError) -> [RateLimitDecision] {
        guard !limits.isEmpty else { return [] }
        let commands = limits.map { limit -> RedisCommand in
            let gcra = GCRA(limit: limit.limit, period: limit.period, burst: limit.burst)
            precondition(
                limit.cost >= 0 && Int64(limit.cost) * gcra.interval <= gcra.tolerance,
                "a rate-limit cost must be within 0...burst, got \(limit.cost)"
            )
            var command: RedisCommand = ["EVALSHA", Self.script.sha1, "1", limit.key]
            command.append(gcra.interval)
            command.append(gcra.tolerance)
            command.append(limit.cost)
            return command
        }
        // After a Redis restart or SCRIPT FLUSH (or on a cluster node new to it) the refused checks
        // run again as EVAL.
        let replies = try await redis.pipelineScript(Self.script, commands)
        var decisions: [RateLimitDecision] = []
        decisions.reserveCapacity(limits.count)
        for (limit, reply) in zip(limits, replies) {
            decisions.append(try Self.decision(try reply.throwingServerError(), key: limit.key))
        }
        return decisions
    }

    private static func decision(_ reply: RedisReply, key: String) throws(RedisError) -> RateLimitDecision {
        guard let elements = reply.array, elements.count == 2, let allowed = elements[0].integer, let value = elements[1].integer else {
            throw RedisError(.protocolError, "rate limit script for \(key): unexpected reply \(reply)")
        }
        return allowed == 1 ? .allowed(remaining: Int(value)) : .limited(retryAfter: .microseconds(value))
    }

    /// ``GCRA/decide(tat:now:cost:)`` in Lua. `KEYS[1]` = the key; `ARGV` = interval µs, tolerance µs,
    /// cost. Returns `{1, remaining}` or `{0, retry_after_µs}`.
    ///
    /// TAT is written with `%.0f`: Lua's `tostring` would round it to 14 significant digits.
    /// `redis.replicate_commands()` makes Redis < 5 replicate the write rather than the script, whose
    /// `TIME` would differ on a replica; Redis ≥ 5 always does so.
    static let script = RedisScript(
        """
        if redis.replicate_commands then redis.replicate_commands() end
        local interval = tonumber(ARGV[1])
        local tolerance = tonumber(ARGV[2])
        local cost = tonumber(ARGV[3])
        local clock = redis.call('TIME')
        local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
        local tat = tonumber(redis.call('GET', KEYS[1]))
        if not tat or tat < now then tat = now end
        local new_tat = tat + interval * cost
        local allow_at = new_tat - tolerance
        if allow_at > now then
          return {0, allow_at - now}
        end
        if new_tat > now then
          local ttl_ms = math.ceil((new_tat - now) / 1000)
          redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', ttl_ms)
        end
        return {1, math.floor((tolerance - (new_tat - now)) / interval)}
        """
    )
}

/// One limit for ``RateLimiter/check(_:)``: `limit` units of `key` per `period`, bursts of up to
/// `burst` (default `limit`), this request costing `cost`.
public struct RateLimit: Sendable, Hashable {
    public var key: String
    public var limit: Int
    public var period: Duration
    public var burst: Int?
    public var cost: Int

    public init(key: String, limit: Int, period: Duration, burst: Int? = nil, cost: Int = 1) {
        self.key = key
        self.limit = limit
        self.period = period
        self.burst = burst
        self.cost = cost
    }
}
