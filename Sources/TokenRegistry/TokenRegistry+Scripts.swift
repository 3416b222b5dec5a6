import Redis

/// The registry's Lua scripts. Each runs atomically in Redis, so a record and the sets indexing it
/// never disagree, whatever mix of upserts and deletes many ingest and feedback instances send for
/// one token at once.
///
/// Every script takes `KEYS[1]` = the record hash and `KEYS[2]` = the shard's token set, and
/// `ARGV[1]` = the shard's key base (``RegistryKeys/base``, e.g. `push:{com.example.game#3}:`) and
/// `ARGV[2]` = the token's hex. User and topic set keys depend on what is stored, so the scripts build
/// them from the base; they share the shard's hash tag, hence its Redis Cluster slot, with `KEYS`.
///
/// In the single-tag layout the scripts also get the app's layout hash (the same slot) as their last
/// key, and refuse to write (error `LAYOUT …`) once it names shards: a migration has started, and
/// the write belongs in the new layout (``TokenRegistry/writing(app:device:_:)``).
extension TokenRegistry {
    /// Shared Lua: whether the layout hash (nil outside the single-tag layout) says the registry is
    /// moving or moved to shards.
    static let layoutFenceLua = """
        local function layout_moved(layout)
          if not layout then return false end
          local shards = redis.call('HGET', layout, 'shards')
          return shards ~= false and shards ~= '1'
        end

        """

    /// The error a fenced script answers with.
    static let layoutRefusal = "return redis.error_reply('LAYOUT the registry is moving to shards; read its layout again')"

    /// Shared Lua: drop `token` from the user and topic sets the record at `record` names.
    /// A `topics` field that is not a JSON array (a hand-edited record) is skipped rather than failing
    /// the script, so such a record can still be replaced or deleted.
    static let leaveIndexSetsLua = """
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

    /// Upsert. `ARGV[3]` = when the registration happened (ms), `ARGV[4]` = the new user or `""` for
    /// none, `ARGV[5]` = the new topics as a JSON array, `ARGV[6]` = a one-time claim or `""`,
    /// `ARGV[7]` = its lifetime (ms), `ARGV[8…]` = the other hash fields as field/value pairs.
    ///
    /// A claim (a legacy credential) is recorded as `<base>once:<claim>` in the same write, so a
    /// registration refused before it (rate limit, Redis down) leaves the credential unused; a claim
    /// made already returns `{3, 0}` with nothing changed.
    ///
    /// Applied only if it is not older than what is stored: a record updated later (`updated_at` >
    /// the event), or a deletion at or after the event (the tombstone `<base>gone:<token>`), wins and
    /// `{2, registered_at}` is returned with nothing changed. Otherwise leaves the old user's set if the
    /// user changed and the sets of topics no longer listed, replaces the hash (keeping
    /// `registered_at` from the first registration; `updated_at` = the event), joins the app, user and
    /// topic sets, clears a tombstone, and returns `{created (1/0), registered_at}`.
    static let upsertScript = RedisScript(
        layoutFenceLua + leaveIndexSetsLua + "\n" + moveDeviceActivityUserLua + """

            if layout_moved(KEYS[3]) then \(layoutRefusal) end
            local record, all = KEYS[1], KEYS[2]
            local base, token, now, user, topics_json = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
            local claim, claim_ms = ARGV[6], ARGV[7]
            if claim ~= '' and redis.call('EXISTS', base .. 'once:' .. claim) == 1 then return {3, 0} end
            local at = tonumber(now)
            local gone = base .. 'gone:' .. token
            local deleted_at = tonumber(redis.call('GET', gone))
            if deleted_at and deleted_at >= at then return {2, 0} end
            local existed = redis.call('EXISTS', record) == 1
            local registered_at = now
            if existed then
              local stored = redis.call('HMGET', record, 'registered_at', 'updated_at')
              if stored[1] and tonumber(stored[1]) then registered_at = stored[1] end
              if stored[2] and tonumber(stored[2]) and tonumber(stored[2]) > at then return {2, registered_at} end
            end
            -- Claimed only when the write happens: a registration refused above leaves it unused.
            if claim ~= '' then redis.call('SET', base .. 'once:' .. claim, '1', 'PX', claim_ms) end
            local topics = cjson.decode(topics_json)
            local keep = {}
            for _, topic in ipairs(topics) do keep[topic] = true end
            if existed then
              local previous_user = redis.call('HGET', record, 'user')
              if (previous_user or '') ~= user then move_device_activity_user(base, token, previous_user, user) end
              leave_index_sets(record, base, token, user, keep)
              redis.call('DEL', record)
            end
            if deleted_at then redis.call('DEL', gone) end
            local fields = {'registered_at', registered_at, 'updated_at', now, 'topics', topics_json}
            for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
            redis.call('HSET', record, unpack(fields))
            redis.call('SADD', all, token)
            if user ~= '' then redis.call('SADD', base .. 'user:' .. user, token) end
            for _, topic in ipairs(topics) do redis.call('SADD', base .. 'topic:' .. topic, token) end
            if existed then return {0, registered_at} end
            return {1, registered_at}
            """
    )

    /// Delete. `ARGV[3]` = when the deletion happened (ms), `ARGV[4]` = the tombstone's lifetime (s).
    ///
    /// A record registered after the deletion (`updated_at` > the event) stays: returns 2. Otherwise
    /// leaves the user and topic sets the record names and the app's set, removes the hash, and leaves
    /// the tombstone `<base>gone:<token>` = the event time (the latest deletion's), so a registration
    /// from before the deletion that arrives late cannot revive the device. Returns 1 if there was a
    /// record, 0 if not.
    static let deleteScript = RedisScript(
        layoutFenceLua + leaveIndexSetsLua + "\n" + removeActivityTokenLua + "\n" + removeDeviceActivityTokensLua + """

            if layout_moved(KEYS[3]) then \(layoutRefusal) end
            local record, all = KEYS[1], KEYS[2]
            local base, token, at, lifetime = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
            local updated_at = tonumber(redis.call('HGET', record, 'updated_at'))
            if updated_at and updated_at > at then return 2 end
            leave_index_sets(record, base, token, false, {})
            redis.call('SREM', all, token)
            remove_device_activity_tokens(base, token, at)
            local gone = base .. 'gone:' .. token
            local deleted_at = tonumber(redis.call('GET', gone))
            if not deleted_at or at > deleted_at then redis.call('SET', gone, ARGV[3], 'EX', lifetime) end
            return redis.call('DEL', record)
            """
    )

    /// CONTRACT.md's invalid-token rule: `ARGV[3]` = when APNs called the token invalid (ms). A record
    /// updated after that moment stays (`{1, updated_at}`); otherwise it is deleted as by
    /// ``deleteScript`` (tombstone at that moment, lifetime `ARGV[4]` s) and returned (`{2, {field, value, …}}`); `{0}` when there is no record. A record
    /// without a readable `updated_at` cannot prove a newer registration, so it is removed.
    static let deleteIfNotRegisteredScript = RedisScript(
        layoutFenceLua + leaveIndexSetsLua + "\n" + removeActivityTokenLua + "\n" + removeDeviceActivityTokensLua + """

            if layout_moved(KEYS[3]) then \(layoutRefusal) end
            local record, all = KEYS[1], KEYS[2]
            local base, token, since, lifetime = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
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
            remove_device_activity_tokens(base, token, since)
            redis.call('DEL', record)
            local gone = base .. 'gone:' .. token
            local deleted_at = tonumber(redis.call('GET', gone))
            if not deleted_at or since > deleted_at then redis.call('SET', gone, ARGV[3], 'EX', lifetime) end
            return {2, fields}
            """
    )
}
