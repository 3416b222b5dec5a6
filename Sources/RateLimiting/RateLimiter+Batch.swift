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

    /// ``checkBatch(_:)`` for several checks (e.g. one per shard of an app's keys), all their script
    /// calls in one pipeline.
    ///
    /// - Parameter sameNode: whether all keys of all checks may go to one script call, which is the
    ///   case on a standalone Redis. A Redis Cluster takes a script's keys only within one slot, so
    ///   there (false) each check has calls of its own. Combining saves Redis a script call per check:
    ///   a 500-token batch spread over 24 shards cost 24 calls.
    public func checkBatches(_ checks: [BatchRateLimit], sameNode: Bool = false) async throws(RedisError) -> [[RateLimitDecision]] {
        // Parts of at most maximumBatchKeys item keys each, in order; then calls of parts.
        var parts: [Part] = []
        for (index, check) in checks.enumerated() {
            var start = 0
            while start < check.itemKeys.count {
                let end = Swift.min(start + Self.maximumBatchKeys, check.itemKeys.count)
                parts.append(Part(check: index, items: start..<end))
                start = end
            }
        }
        var calls: [[Part]] = []
        var keysInCall = 0
        for part in parts {
            if sameNode, !calls.isEmpty, keysInCall + part.items.count <= Self.maximumBatchKeys {
                calls[calls.count - 1].append(part)
                keysInCall += part.items.count
            } else {
                calls.append([part])
                keysInCall = part.items.count
            }
        }
        var decisions = [[RateLimitDecision]](repeating: [], count: checks.count)
        guard !calls.isEmpty else { return decisions }
        let commands = calls.map { call -> RedisCommand in
            var command: RedisCommand = ["EVALSHA", Self.batchScript.sha1]
            command.append(call.count + call.reduce(0) { $0 + $1.items.count })
            for part in call { command.append(checks[part.check].sharedKey) }
            for part in call { command.append(contentsOf: Array(checks[part.check].itemKeys[part.items])) }
            for part in call {
                let check = checks[part.check]
                let shared = GCRA(limit: check.sharedLimit, period: check.sharedPeriod, burst: check.sharedBurst)
                let item = GCRA(limit: check.itemLimit, period: check.itemPeriod)
                command.append(contentsOf: [
                    String(shared.interval), String(shared.tolerance), String(item.interval), String(item.tolerance), String(part.items.count),
                ])
            }
            return command
        }
        let replies = try await redis.pipelineScript(Self.batchScript, commands)
        guard replies.count == calls.count else {
            throw RedisError(.protocolError, "batch rate limit script: \(replies.count) replies to \(calls.count) calls")
        }
        for (call, reply) in zip(calls, replies) {
            let sharedKey = checks[call[0].check].sharedKey
            let reply = try reply.throwingServerError()
            let count = call.reduce(0) { $0 + $1.items.count }
            guard let elements = reply.array, elements.count == count * 2 else {
                throw RedisError(.protocolError, "batch rate limit script for \(sharedKey): unexpected reply \(reply)")
            }
            var offset = 0
            for part in call {
                for _ in part.items {
                    guard let allowed = elements[offset * 2].integer, let value = elements[offset * 2 + 1].integer else {
                        throw RedisError(.protocolError, "batch rate limit script for \(sharedKey): unexpected reply \(reply)")
                    }
                    decisions[part.check].append(allowed == 1 ? .allowed(remaining: Int(value)) : .limited(retryAfter: .microseconds(value)))
                    offset += 1
                }
            }
        }
        return decisions
    }

    /// Item keys `items` of check `check`: what one group of a script call decides.
    private struct Part {
        let check: Int
        let items: Range<Int>
    }

    /// One call decides one or more groups, each a shared allowance and its items. `KEYS` = the
    /// groups' shared keys, then their item keys, group after group; `ARGV` = five values a group:
    /// shared interval µs, shared tolerance µs, item interval µs, item tolerance µs, its item count.
    /// Returns `{allowed, value}` pairs per item, in order: `{1, remaining}` or `{0, retry_after_µs}`.
    /// The same GCRA as ``script``, per key, reading the clock once; keys expire when their state
    /// would be idle again.
    static let batchScript = RedisScript(
        """
        if redis.replicate_commands then redis.replicate_commands() end
        local clock = redis.call('TIME')
        local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
        local groups = #ARGV / 5
        local result = {}
        local first = groups
        local done = 0
        for g = 1, groups do
          local shared_interval = tonumber(ARGV[5 * g - 4])
          local shared_tolerance = tonumber(ARGV[5 * g - 3])
          local item_interval = tonumber(ARGV[5 * g - 2])
          local item_tolerance = tonumber(ARGV[5 * g - 1])
          local count = tonumber(ARGV[5 * g])
          if count > 0 then
            local shared_tat = tonumber(redis.call('GET', KEYS[g]))
            if not shared_tat or shared_tat < now then shared_tat = now end
            local waiting_tat = shared_tat
            local stored = redis.call('MGET', unpack(KEYS, first + 1, first + count))
            for i = 1, count do
              local at = 2 * (done + i)
              local tat = tonumber(stored[i])
              if not tat or tat < now then tat = now end
              local new_tat = tat + item_interval
              local allow_at = new_tat - item_tolerance
              if allow_at > now then
                result[at - 1] = 0
                result[at] = allow_at - now
              else
                local new_shared = shared_tat + shared_interval
                if new_shared - shared_tolerance > now then
                  if waiting_tat < shared_tat then waiting_tat = shared_tat end
                  waiting_tat = waiting_tat + shared_interval
                  result[at - 1] = 0
                  result[at] = waiting_tat - shared_tolerance - now
                else
                  shared_tat = new_shared
                  if new_tat > now then
                    redis.call('SET', KEYS[first + i], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
                  end
                  result[at - 1] = 1
                  result[at] = math.floor((item_tolerance - (new_tat - now)) / item_interval)
                end
              end
            end
            if shared_tat > now then
              redis.call('SET', KEYS[g], string.format('%.0f', shared_tat), 'PX', math.ceil((shared_tat - now) / 1000))
            end
            first = first + count
            done = done + count
          end
        end
        return result
        """
    )
}
