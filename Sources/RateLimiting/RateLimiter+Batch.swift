public import Redis

/// Two limits over many items at once: one shared allowance (e.g. an app's notifications per second)
/// and one allowance per item (e.g. each device's notifications per hour). Used by ``RateLimiter/checkBatch(_:)``.
public struct BatchRateLimit: Sendable, Hashable {
    /// The key of the shared allowance, e.g. `push:{com.example.game}:send:rate:app`.
    public var sharedKey: String
    public var sharedLimit: Int
    public var sharedPeriod: Duration
    /// The shared allowance's burst (default: its limit).
    public var sharedBurst: Int?
    /// One key per item, e.g. `push:{com.example.game}:send:rate:device:<token>`. Put the shared key's
    /// hash tag in them so all keys of one check live in one Redis Cluster slot.
    public var itemKeys: [String]
    public var itemLimit: Int
    public var itemPeriod: Duration

    public init(
        sharedKey: String, sharedLimit: Int, sharedPeriod: Duration, sharedBurst: Int? = nil, itemKeys: [String], itemLimit: Int,
        itemPeriod: Duration
    ) {
        self.sharedKey = sharedKey
        self.sharedLimit = sharedLimit
        self.sharedPeriod = sharedPeriod
        self.sharedBurst = sharedBurst
        self.itemKeys = itemKeys
        self.itemLimit = itemLimit
        self.itemPeriod = itemPeriod
    }
}

extension RateLimiter {
    /// The most item keys one script call takes; longer checks are split (Lua's `unpack` has a
    /// stack limit of a few thousand values).
    public static let maximumBatchKeys = 1000

    /// Spends one unit of each item's allowance and of the shared allowance for every item both allow,
    /// in order, atomically (one Lua script per ``maximumBatchKeys`` items, one round trip each).
    ///
    /// An item refused by its own limit spends nothing; an item its own limit allows but the shared
    /// allowance cannot cover spends nothing either, and its `retryAfter` grows with its position among
    /// those refused (the k-th waits for k more shared units), so deferred items come back spread out
    /// rather than all at once. Both limits are ``GCRA`` with the default burst (the limit).
    ///
    /// - Returns: one decision per item key, in order. `remaining` is the item's own allowance left.
    /// - Throws: the Redis client's error; callers decide whether to fail open or closed.
    public func checkBatch(_ check: BatchRateLimit) async throws(RedisError) -> [RateLimitDecision] {
        try await checkBatches([check])[0]
    }

    /// ``checkBatch(_:)`` for several checks (e.g. one per shard of a Redis Cluster), all their
    /// script calls in one pipeline.
    public func checkBatches(_ checks: [BatchRateLimit]) async throws(RedisError) -> [[RateLimitDecision]] {
        var commands: [RedisCommand] = []
        var calls: [(check: Int, keys: Int)] = []
        for (index, check) in checks.enumerated() {
            let shared = GCRA(limit: check.sharedLimit, period: check.sharedPeriod, burst: check.sharedBurst)
            let item = GCRA(limit: check.itemLimit, period: check.itemPeriod)
            var start = 0
            while start < check.itemKeys.count {
                let keys = Array(check.itemKeys[start..<Swift.min(start + Self.maximumBatchKeys, check.itemKeys.count)])
                var command: RedisCommand = ["EVALSHA", Self.batchScript.sha1]
                command.append(keys.count + 1)
                command.append(check.sharedKey)
                command.append(contentsOf: keys)
                command.append(contentsOf: [String(shared.interval), String(shared.tolerance), String(item.interval), String(item.tolerance)])
                commands.append(command)
                calls.append((index, keys.count))
                start += keys.count
            }
        }
        var decisions = [[RateLimitDecision]](repeating: [], count: checks.count)
        guard !commands.isEmpty else { return decisions }
        let replies = try await redis.pipelineScript(Self.batchScript, commands)
        for ((check, count), reply) in zip(calls, replies) {
            let sharedKey = checks[check].sharedKey
            let reply = try reply.throwingServerError()
            guard let elements = reply.array, elements.count == count * 2 else {
                throw RedisError(.protocolError, "batch rate limit script for \(sharedKey): unexpected reply \(reply)")
            }
            for index in 0..<count {
                guard let allowed = elements[index * 2].integer, let value = elements[index * 2 + 1].integer else {
                    throw RedisError(.protocolError, "batch rate limit script for \(sharedKey): unexpected reply \(reply)")
                }
                decisions[check].append(allowed == 1 ? .allowed(remaining: Int(value)) : .limited(retryAfter: .microseconds(value)))
            }
        }
        return decisions
    }

    /// `KEYS[1]` = the shared key, `KEYS[2…]` = item keys; `ARGV` = shared interval µs, shared
    /// tolerance µs, item interval µs, item tolerance µs. Returns `{allowed, value}` pairs per item:
    /// `{1, remaining}` or `{0, retry_after_µs}`. The same GCRA as ``script``, per key, reading the
    /// clock once; keys expire when their state would be idle again.
    static let batchScript = RedisScript(
        """
        if redis.replicate_commands then redis.replicate_commands() end
        local shared_interval = tonumber(ARGV[1])
        local shared_tolerance = tonumber(ARGV[2])
        local item_interval = tonumber(ARGV[3])
        local item_tolerance = tonumber(ARGV[4])
        local clock = redis.call('TIME')
        local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
        local shared_tat = tonumber(redis.call('GET', KEYS[1]))
        if not shared_tat or shared_tat < now then shared_tat = now end
        local waiting_tat = shared_tat
        local result = {}
        local count = #KEYS - 1
        if count == 0 then return result end
        local stored = redis.call('MGET', unpack(KEYS, 2))
        for i = 1, count do
          local tat = tonumber(stored[i])
          if not tat or tat < now then tat = now end
          local new_tat = tat + item_interval
          local allow_at = new_tat - item_tolerance
          if allow_at > now then
            result[2 * i - 1] = 0
            result[2 * i] = allow_at - now
          else
            local new_shared = shared_tat + shared_interval
            if new_shared - shared_tolerance > now then
              if waiting_tat < shared_tat then waiting_tat = shared_tat end
              waiting_tat = waiting_tat + shared_interval
              result[2 * i - 1] = 0
              result[2 * i] = waiting_tat - shared_tolerance - now
            else
              shared_tat = new_shared
              if new_tat > now then
                redis.call('SET', KEYS[i + 1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
              end
              result[2 * i - 1] = 1
              result[2 * i] = math.floor((item_tolerance - (new_tat - now)) / item_interval)
            end
          end
        end
        if shared_tat > now then
          redis.call('SET', KEYS[1], string.format('%.0f', shared_tat), 'PX', math.ceil((shared_tat - now) / 1000))
        end
        return result
        """
    )
}
