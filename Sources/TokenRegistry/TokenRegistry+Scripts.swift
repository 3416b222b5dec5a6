import Redis

/// The registry's Lua scripts. Each runs atomically in Redis, so a record and the sets indexing it
/// never disagree, whatever mix of upserts and deletes many ingest and feedback instances send for
/// one token at once.
///
/// Every script takes `KEYS[1]` = the record hash and `KEYS[2]` = the app's token set, and
/// `ARGV[1]` = the app's key base (``RegistryKeys/base``, e.g. `push:{com.example.game}:`) and
/// `ARGV[2]` = the token's hex. User and topic set keys depend on what is stored, so the scripts build
/// them from the base; they share the app's hash tag, hence its Redis Cluster slot, with `KEYS`.
extension TokenRegistry {
    /// Shared Lua: drop `token` from the user and topic sets the record at `record` names.
    /// A `topics` field that is not a JSON array (a hand-edited record) is skipped rather than failing
    /// the script, so such a record can still be replaced or deleted.
    private static let leaveIndexSetsLua = """
        local function leave_index_sets(record, base, token, keep_user, keep_topics)
          local old = redis.call('HMGET', record, 'user', 'topics')
          if old[1] and old[1] ~= keep_user then
            redis.call('SREM', base .. 'user:' .. old[1], token)
          end
          if old[2] then
            local ok, topics = pcall(cjson.decode, old[2])
            if ok and type(topics) == 'table' then
              for _, topic in ipairs(topics) do
                if type(topic) == 'string' and not keep_topics[topic] then
                  redis.call('SREM', base .. 'topic:' .. topic, token)
                end
              end
            end
          end
        end
        """

    /// Upsert. `ARGV[3]` = now (ms), `ARGV[4]` = the new user or `""` for none, `ARGV[5]` = the new
    /// topics as a JSON array, `ARGV[6…]` = the other hash fields as field/value pairs.
    ///
    /// Leaves the old user's set if the user changed and the sets of topics no longer listed, replaces
    /// the hash (keeping `registered_at` from the first registration; `updated_at` = now), joins the app,
    /// user and topic sets. Returns `{created (1/0), registered_at}`.
    static let upsertScript = RedisScript(
        leaveIndexSetsLua + """

            local record, all = KEYS[1], KEYS[2]
            local base, token, now, user, topics_json = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
            local topics = cjson.decode(topics_json)
            local keep = {}
            for _, topic in ipairs(topics) do keep[topic] = true end
            local existed = redis.call('EXISTS', record) == 1
            local registered_at = now
            if existed then
              local old = redis.call('HGET', record, 'registered_at')
              if old and tonumber(old) then registered_at = old end
              leave_index_sets(record, base, token, user, keep)
              redis.call('DEL', record)
            end
            local fields = {'registered_at', registered_at, 'updated_at', now, 'topics', topics_json}
            for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
            redis.call('HSET', record, unpack(fields))
            redis.call('SADD', all, token)
            if user ~= '' then redis.call('SADD', base .. 'user:' .. user, token) end
            for _, topic in ipairs(topics) do redis.call('SADD', base .. 'topic:' .. topic, token) end
            if existed then return {0, registered_at} end
            return {1, registered_at}
            """
    )

    /// Delete: leaves the user and topic sets the record names and the app's set, removes the hash.
    /// Returns 1 if there was a record, 0 if not.
    static let deleteScript = RedisScript(
        leaveIndexSetsLua + """

            local record, all = KEYS[1], KEYS[2]
            local base, token = ARGV[1], ARGV[2]
            leave_index_sets(record, base, token, false, {})
            redis.call('SREM', all, token)
            return redis.call('DEL', record)
            """
    )

    /// CONTRACT.md's invalid-token rule: `ARGV[3]` = when APNs called the token invalid (ms). A record
    /// updated after that moment stays (`{1, updated_at}`); otherwise it is deleted as by
    /// ``deleteScript`` and returned (`{2, {field, value, …}}`); `{0}` when there is no record. A record
    /// without a readable `updated_at` cannot prove a newer registration, so it is removed.
    static let deleteIfNotRegisteredScript = RedisScript(
        leaveIndexSetsLua + """

            local record, all = KEYS[1], KEYS[2]
            local base, token, since = ARGV[1], ARGV[2], tonumber(ARGV[3])
            if redis.call('EXISTS', record) == 0 then
              redis.call('SREM', all, token)
              return {0}
            end
            local updated_at = redis.call('HGET', record, 'updated_at')
            if updated_at and tonumber(updated_at) and tonumber(updated_at) > since then
              return {1, updated_at}
            end
            local fields = redis.call('HGETALL', record)
            leave_index_sets(record, base, token, false, {})
            redis.call('SREM', all, token)
            redis.call('DEL', record)
            return {2, fields}
            """
    )
}
