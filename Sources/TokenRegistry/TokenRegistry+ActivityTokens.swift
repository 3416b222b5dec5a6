public import PushCore
import Redis

/// Live Activity tokens beside the device records (issue 13): a device's push-to-start token per
/// attributes type and the update token of each running activity.
///
/// | key | type | holds |
/// |---|---|---|
/// | `{prefix}:{<tag>}:activity-token:<hex>` | hash | the token's record: `kind` (`push_to_start`/`update`), `device`, `attributes_type`, `activity_id`, `user`, `locale`, `environment`, `registered_at`, `updated_at`, `expires_at` (ms); an update token's record expires at `expires_at` |
/// | `{prefix}:{<tag>}:device-activities:<device hex>` | hash | the device's slots: `pts:<type>` / `activity:<id>` → the token holding it |
/// | `{prefix}:{<tag>}:pts:<attributes type>` | set | push-to-start tokens of that type (in this shard) |
/// | `{prefix}:{<tag>}:pts-user:<user>` | set | the user's push-to-start tokens (in this shard) |
/// | `{prefix}:{<tag>}:activity:<activity id>` | set | update tokens of that activity (in this shard; expires with its last token) |
/// | `{prefix}:{<tag>}:activity-user:<user>` | set | the user's update tokens (in this shard; expires with its last token) |
///
/// `<tag>` is the tag of the *device's* shard (``RegistryLayout/shard(of:)`` of the device token): a
/// device's Live Activity tokens live beside its record, so replacing a slot's token, deleting the
/// device and moving its activities to a new user are each one script. Finding an activity token
/// by its own hex alone (push-feedback's invalid-token reports) therefore looks in every shard.
///
/// `user`, `locale` and `environment` are the registration's, or else the device record's at the
/// time of registration (apps register activity tokens after the device, and again whenever
/// ActivityKit hands out a new one). Sets may hold tokens whose record has expired: push-render skips
/// those (no record), and the set itself expires with the last of its tokens.
///
/// The same ordering rules as device records hold: a registration older than the slot's stored token
/// or than a deletion (the tombstone `gone:<hex>`) changes nothing. push-feedback removes an activity
/// token APNs calls invalid like a device token (``removeIfNotRegistered(_:now:noteLifetime:)``).
extension TokenRegistry {
    /// Stores `registration` in `device`'s slot, replacing the token the slot held before (which is
    /// removed with its set memberships), if it is the newest news of the slot.
    ///
    /// - Parameters:
    ///   - defaultEnvironment: the app's, when neither the registration nor the device names one.
    ///   - now: when the registration happened (ms since 1970).
    ///   - maxSlots: the most slots one device may hold (deletion marks give way); a new slot beyond
    ///     them is refused (``ActivityTokenUpserted/refusedAtCap``).
    public func upsertActivityToken(
        app: String, device: DeviceToken, registration: ActivityTokenRegistration, defaultEnvironment: AppConfiguration.Environment, now: Int64,
        maxSlots: Int = AppConfiguration.Ingest.defaultMaxActivitySlots
    ) async throws(RegistryError) -> ActivityTokenUpserted {
        let slot = registration.slot
        var activityID = ""
        if case .activity(let id) = slot { activityID = id }
        let operation = "activity token upsert of \(registration.pushToken.redacted)"
        let reply = try await writing(app: app, device: device) { keys, fence throws(RegistryError) in
            let args = [
                keys.base, registration.pushToken.hex, String(now), slot.field, slot.kind, registration.attributesType ?? "", activityID,
                registration.user ?? "", registration.locale ?? "", registration.environment?.rawValue ?? "", defaultEnvironment.rawValue,
                registration.expiresAt.map(String.init) ?? "", device.hex, String(Self.tombstoneLifetime.components.seconds * 1000),
                String(max(1, maxSlots)),
            ]
            let recordKey = keys.activityRecord(registration.pushToken)
            return try await runActivityScript(
                Self.upsertActivityTokenScript, keys: [recordKey, keys.deviceActivities(device), keys.record(device)] + fence, args: args,
                operation: "activity token upsert of \(keys.base)activity-token:\(registration.pushToken.redacted)", key: recordKey)
        }
        guard let elements = reply.array, elements.count == 5, let outcome = elements[0].integer, let registeredAt = elements[1].integer,
            let environmentName = elements[4].string, let environment = AppConfiguration.Environment(rawValue: environmentName)
        else {
            throw RegistryError.unexpectedReply(reply, during: operation)
        }
        let record = ActivityTokenRecord(
            app: app, device: device, slot: slot, pushToken: registration.pushToken, attributesType: registration.attributesType,
            user: elements[2].string.flatMap { $0.isEmpty ? nil : $0 }, locale: elements[3].string.flatMap { $0.isEmpty ? nil : $0 },
            environment: environment, registeredAt: outcome == 4 || (outcome == 2 && registeredAt == 0) ? now : registeredAt, updatedAt: now,
            expiresAt: registration.expiresAt)
        return ActivityTokenUpserted(
            created: outcome == 1, applied: outcome < 2, refusedAtCap: outcome == 4 ? Int(registeredAt) : nil, record: record)
    }

    /// Removes the token in `device`'s `slot` (record and set memberships) unless it was registered
    /// after `at`, and remembers the deletion so a late, older registration cannot bring it back.
    ///
    /// - Returns: whether a token was removed.
    @discardableResult
    public func deleteActivityToken(app: String, device: DeviceToken, slot: ActivityTokenSlot, at: Int64) async throws(RegistryError) -> Bool {
        let reply = try await writing(app: app, device: device) { keys, fence throws(RegistryError) in
            let slotsKey = keys.deviceActivities(device)
            return try await runActivityScript(
                Self.deleteActivityTokenScript, keys: [slotsKey] + fence,
                args: [keys.base, slot.field, String(at), String(Self.tombstoneLifetime.components.seconds)],
                operation: "activity token delete of \(slotsKey) \(slot.field)", key: slotsKey)
        }
        guard let removed = reply.integer else { throw RegistryError.unexpectedReply(reply, during: "activity token delete") }
        return removed == 1
    }

    /// The token in `device`'s `slot`, or nil when the slot is empty (or its token expired).
    public func activityToken(app: String, device: DeviceToken, slot: ActivityTokenSlot) async throws(RegistryError) -> ActivityTokenRecord? {
        for layout in try await layouts.state(app: app).readOrder {
            if let record = try await activityToken(
                keys: layout.keys(prefix: keyPrefix, app: app, device: device), app: app, device: device, slot: slot)
            {
                return record
            }
        }
        return nil
    }

    private func activityToken(
        keys: RegistryKeys, app: String, device: DeviceToken, slot: ActivityTokenSlot
    ) async throws(RegistryError)
        -> ActivityTokenRecord?
    {
        let slotsKey = keys.deviceActivities(device)
        let held: RedisReply
        do {
            held = try await redis.execute("HGET", slotsKey, slot.field)
        } catch {
            throw RegistryError.redis(error, during: "lookup of \(slotsKey)", key: slotsKey)
        }
        guard let hex = held.string, let pushToken = try? DeviceToken(normalizing: hex) else { return nil }
        let recordKey = keys.activityRecord(pushToken)
        let reply: RedisReply
        do {
            reply = try await redis.execute("HGETALL", recordKey)
        } catch {
            throw RegistryError.redis(error, during: "lookup of \(keys.base)activity-token:\(pushToken.redacted)", key: recordKey)
        }
        guard let fields = reply.array, !fields.isEmpty else { return nil }
        var hash: [String: String] = [:]
        var index = 0
        while index + 1 < fields.count {
            if let field = fields[index].string { hash[field] = fields[index + 1].string }
            index += 2
        }
        func corrupt(_ field: String) -> RegistryError {
            RegistryError.corrupt(key: recordKey, field: field, "holds \(hash[field].map { "\"\($0)\"" } ?? "nothing")")
        }
        guard let environment = hash["environment"].flatMap(AppConfiguration.Environment.init(rawValue:)) else { throw corrupt("environment") }
        guard let registeredAt = hash["registered_at"].flatMap({ Int64($0) }) else { throw corrupt("registered_at") }
        guard let updatedAt = hash["updated_at"].flatMap({ Int64($0) }) else { throw corrupt("updated_at") }
        return ActivityTokenRecord(
            app: app, device: device, slot: slot, pushToken: pushToken, attributesType: hash["attributes_type"].flatMap { $0.isEmpty ? nil : $0 },
            user: hash["user"].flatMap { $0.isEmpty ? nil : $0 }, locale: hash["locale"].flatMap { $0.isEmpty ? nil : $0 },
            environment: environment, registeredAt: registeredAt, updatedAt: updatedAt, expiresAt: hash["expires_at"].flatMap { Int64($0) })
    }

    private func runActivityScript(
        _ script: RedisScript, keys: [String], args: [String], operation: String, key: String
    ) async throws(RegistryError) -> RedisReply {
        let reply: RedisReply
        do {
            reply = try await redis.evalScript(script, keys: keys, args: args)
        } catch {
            throw RegistryError.redis(error, during: operation, key: key)
        }
        if let message = reply.errorMessage {
            throw RegistryError.redis(RedisError(.serverError, message), during: operation, key: key)
        }
        return reply
    }

    /// Shared Lua: removes the activity token `token` (record at `base .. 'activity-token:' .. token`)
    /// from the sets its record names and from its device's slot (if the slot still holds it), then
    /// the record. Returns the record's `user` (or false) and whether there was a record.
    static let removeActivityTokenLua = """
        local function remove_activity_token(base, token)
          local record = base .. 'activity-token:' .. token
          local held = redis.call('HMGET', record, 'kind', 'attributes_type', 'activity_id', 'user', 'device')
          if not held[1] and redis.call('EXISTS', record) == 0 then return false, false end
          if held[1] == 'push_to_start' then
            if held[2] then redis.call('SREM', base .. 'pts:' .. held[2], token) end
            if held[4] then redis.call('SREM', base .. 'pts-user:' .. held[4], token) end
          else
            if held[3] then redis.call('SREM', base .. 'activity:' .. held[3], token) end
            if held[4] then redis.call('SREM', base .. 'activity-user:' .. held[4], token) end
          end
          if held[5] then
            local slot = held[1] == 'push_to_start' and ('pts:' .. (held[2] or '')) or ('activity:' .. (held[3] or ''))
            local slots = base .. 'device-activities:' .. held[5]
            if redis.call('HGET', slots, slot) == token then redis.call('HDEL', slots, slot) end
          end
          redis.call('DEL', record)
          return held[4] or false, true
        end
        """

    /// Shared Lua (after ``removeActivityTokenLua``): removes the Live Activity tokens of the device
    /// `device_hex` registered at or before `since` (ms), when the device itself is deleted or
    /// reported invalid (an app that is gone from the device has no running activities either); a
    /// token registered after that moment is newer news and stays. The device's own tombstone
    /// (`gone:<device>`) keeps late, older activity registrations out.
    static let removeDeviceActivityTokensLua = """
        local function remove_device_activity_tokens(base, device_hex, since)
          local slots = base .. 'device-activities:' .. device_hex
          local held = redis.call('HGETALL', slots)
          for i = 1, #held, 2 do
            if string.sub(held[i], 1, 4) ~= 'del:' then
              local updated = tonumber(redis.call('HGET', base .. 'activity-token:' .. held[i + 1], 'updated_at'))
              if not updated or updated <= since then
                remove_activity_token(base, held[i + 1])
                redis.call('HDEL', slots, held[i])
              end
            end
          end
        end
        """

    /// Shared Lua (for the device upsert): when a device changes hands (its `user` changes), its
    /// Live Activity tokens that took the device's user move to the new user's sets (or leave the
    /// old user's, when there is none now), so a push to the old user never reaches the device.
    /// Tokens registered with a user of their own keep it.
    static let moveDeviceActivityUserLua = """
        local function move_device_activity_user(base, device_hex, old_user, new_user)
          local held = redis.call('HGETALL', base .. 'device-activities:' .. device_hex)
          for i = 1, #held, 2 do
            if string.sub(held[i], 1, 4) ~= 'del:' then
              local token = held[i + 1]
              local record = base .. 'activity-token:' .. token
              local fields = redis.call('HMGET', record, 'kind', 'user', 'expires_at')
              if fields[1] and fields[2] == old_user then
                local prefix = fields[1] == 'push_to_start' and 'pts-user:' or 'activity-user:'
                if fields[2] then redis.call('SREM', base .. prefix .. fields[2], token) end
                if new_user ~= '' then
                  redis.call('HSET', record, 'user', new_user)
                  local set = base .. prefix .. new_user
                  redis.call('SADD', set, token)
                  local expires = tonumber(fields[3])
                  if expires and redis.call('PEXPIRETIME', set) < expires then redis.call('PEXPIREAT', set, expires) end
                else
                  redis.call('HDEL', record, 'user')
                end
              end
            end
          end
        end
        """

    /// Upsert of an activity token. `KEYS[1]` its record, `KEYS[2]` the device's slots, `KEYS[3]` the
    /// device's record (`KEYS[4]` the layout hash, in the single-tag layout); `ARGV`: base, token, now (ms), slot field, kind, attributes type, activity id,
    /// user, locale, environment (each `""` when not given), the app's environment, expires at (ms or
    /// `""`), the device's hex, the tombstones' lifetime (ms), the most slots a device may hold.
    ///
    /// Returns `{2, registered_at, …}` with nothing changed when the slot's token, the token's own
    /// record or a deletion (tombstone) is newer; `{4, cap, …}` when the slot is new and the device
    /// holds `cap` live slots (deletion marks give way, the oldest first); else `{created (1/0), registered_at, user, locale,
    /// environment}` as stored.
    static let upsertActivityTokenScript = RedisScript(
        layoutFenceLua + removeActivityTokenLua + """

            if layout_moved(KEYS[4]) then \(layoutRefusal) end
            local record, slots, device = KEYS[1], KEYS[2], KEYS[3]
            local base, token, now, slot, kind, atype, aid = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
            local user, locale, env, default_env, expires, device_hex = ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13]
            local at = tonumber(now)
            local deleted_at = tonumber(redis.call('GET', base .. 'gone:' .. token))
            if deleted_at and deleted_at >= at then return {2, 0, '', '', default_env} end
            -- The device was deleted, or this slot emptied, after this registration happened.
            local device_gone = tonumber(redis.call('GET', base .. 'gone:' .. device_hex))
            if device_gone and device_gone >= at then return {2, 0, '', '', default_env} end
            local slot_deleted = tonumber(redis.call('HGET', slots, 'del:' .. slot))
            if slot_deleted and slot_deleted >= at then return {2, 0, '', '', default_env} end
            local stored = redis.call('HMGET', record, 'updated_at', 'registered_at')
            if stored[1] and tonumber(stored[1]) and tonumber(stored[1]) > at then return {2, tonumber(stored[2]) or 0, '', '', default_env} end
            -- Slots whose token has expired, and slot deletions older than the tombstones' lifetime,
            -- are forgotten, so the device's hash stays small.
            local function forget_lapsed()
              local held = redis.call('HGETALL', slots)
              for i = 1, #held, 2 do
                if string.sub(held[i], 1, 4) == 'del:' then
                  if tonumber(held[i + 1]) and tonumber(held[i + 1]) < at - tonumber(ARGV[14]) then redis.call('HDEL', slots, held[i]) end
                elseif held[i] ~= slot and redis.call('EXISTS', base .. 'activity-token:' .. held[i + 1]) == 0 then
                  redis.call('HDEL', slots, held[i])
                end
              end
            end
            -- A new slot on a device at the cap is refused before anything is read in full: the
            -- hash (slots and deletion marks) never grows past the cap, so every script that reads
            -- it whole stays bounded.
            local cap = tonumber(ARGV[15])
            if redis.call('HEXISTS', slots, slot) == 0 and redis.call('HLEN', slots) >= cap then
              if redis.call('HLEN', slots) <= cap then
                forget_lapsed()
                -- Still full: a slot deletion's mark gives way (the oldest; it only keeps a late,
                -- older registration of that slot out), so only live slots count against the cap.
                if redis.call('HLEN', slots) >= cap then
                  local held = redis.call('HGETALL', slots)
                  local oldest, oldest_at = nil, nil
                  for i = 1, #held, 2 do
                    if string.sub(held[i], 1, 4) == 'del:' then
                      local marked = tonumber(held[i + 1]) or 0
                      if not oldest_at or marked < oldest_at then oldest, oldest_at = held[i], marked end
                    end
                  end
                  if oldest then redis.call('HDEL', slots, oldest) end
                end
              end
              if redis.call('HLEN', slots) >= cap then return {4, cap, '', '', default_env} end
            end
            local previous = redis.call('HGET', slots, slot)
            if previous and previous ~= token then
              local previous_at = tonumber(redis.call('HGET', base .. 'activity-token:' .. previous, 'updated_at'))
              if previous_at and previous_at > at then return {2, 0, '', '', default_env} end
              remove_activity_token(base, previous)
            end
            forget_lapsed()
            local registered_at = now
            local existed = redis.call('EXISTS', record) == 1
            if existed then
              if stored[2] and tonumber(stored[2]) then registered_at = stored[2] end
              remove_activity_token(base, token)
            end
            local from_device = redis.call('HMGET', device, 'user', 'locale', 'environment')
            if user == '' and from_device[1] then user = from_device[1] end
            if locale == '' and from_device[2] then locale = from_device[2] end
            if env == '' then env = from_device[3] or default_env end
            local fields = {'kind', kind, 'device', device_hex, 'environment', env, 'registered_at', registered_at, 'updated_at', now}
            if atype ~= '' then fields[#fields + 1] = 'attributes_type'; fields[#fields + 1] = atype end
            if aid ~= '' then fields[#fields + 1] = 'activity_id'; fields[#fields + 1] = aid end
            if user ~= '' then fields[#fields + 1] = 'user'; fields[#fields + 1] = user end
            if locale ~= '' then fields[#fields + 1] = 'locale'; fields[#fields + 1] = locale end
            if expires ~= '' then fields[#fields + 1] = 'expires_at'; fields[#fields + 1] = expires end
            redis.call('HSET', record, unpack(fields))
            redis.call('HSET', slots, slot, token)
            local sets
            if kind == 'push_to_start' then
              sets = {base .. 'pts:' .. atype}
              if user ~= '' then sets[#sets + 1] = base .. 'pts-user:' .. user end
            else
              sets = {base .. 'activity:' .. aid}
              if user ~= '' then sets[#sets + 1] = base .. 'activity-user:' .. user end
            end
            for _, set in ipairs(sets) do redis.call('SADD', set, token) end
            if expires ~= '' then
              local until_ms = tonumber(expires)
              redis.call('PEXPIREAT', record, until_ms)
              for _, set in ipairs(sets) do
                local current = redis.call('PEXPIRETIME', set)
                if current < until_ms then redis.call('PEXPIREAT', set, until_ms) end
              end
            end
            if deleted_at then redis.call('DEL', base .. 'gone:' .. token) end
            return {existed and 0 or 1, tonumber(registered_at), user, locale, env}
            """
    )

    /// Delete of a device's slot. `KEYS[1]` the device's slots (`KEYS[2]` the layout hash, in the
    /// single-tag layout); `ARGV`: base, slot field, at (ms),
    /// tombstone lifetime (s). Returns 1 (removed), 0 (empty slot) or 2 (registered after `at`: kept).
    static let deleteActivityTokenScript = RedisScript(
        layoutFenceLua + removeActivityTokenLua + """

            if layout_moved(KEYS[2]) then \(layoutRefusal) end
            local slots = KEYS[1]
            local base, slot, at, lifetime = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
            local token = redis.call('HGET', slots, slot)
            if not token then return 0 end
            local updated_at = tonumber(redis.call('HGET', base .. 'activity-token:' .. token, 'updated_at'))
            if updated_at and updated_at > at then return 2 end
            local _, existed = remove_activity_token(base, token)
            redis.call('HDEL', slots, slot)
            -- The slot's deletion time, so a late registration from before it cannot fill it again.
            local slot_deleted = tonumber(redis.call('HGET', slots, 'del:' .. slot))
            if not slot_deleted or at > slot_deleted then redis.call('HSET', slots, 'del:' .. slot, ARGV[3]) end
            local gone = base .. 'gone:' .. token
            local deleted_at = tonumber(redis.call('GET', gone))
            if not deleted_at or at > deleted_at then redis.call('SET', gone, ARGV[3], 'EX', lifetime) end
            if existed then return 1 end
            return 0
            """
    )
}

/// What ``TokenRegistry/upsertActivityToken(app:device:registration:defaultEnvironment:now:)`` did.
public struct ActivityTokenUpserted: Sendable, Equatable {
    /// The slot held no record of this token before.
    public let created: Bool
    /// False when newer news of the slot or token was already stored, or the device is at its cap:
    /// nothing changed.
    public let applied: Bool
    /// The cap, when the slot was new and the device held that many slots already: nothing changed.
    public let refusedAtCap: Int?
    public let record: ActivityTokenRecord
}

extension RegistryKeys {
    /// The hash holding a Live Activity token's record.
    public func activityRecord(_ token: DeviceToken) -> String { base + "activity-token:" + token.hex }
    /// The hash of a device's Live Activity token slots.
    public func deviceActivities(_ device: DeviceToken) -> String { base + "device-activities:" + device.hex }
    /// The set of push-to-start tokens of an attributes type.
    public func pushToStartTokens(attributesType: String) -> String { base + "pts:" + attributesType }
    /// The set of a user's push-to-start tokens.
    public func pushToStartTokens(user: String) -> String { base + "pts-user:" + user }
    /// The set of update tokens of an activity.
    public func activityTokens(activityID: String) -> String { base + "activity:" + activityID }
    /// The set of a user's update tokens.
    public func activityTokens(user: String) -> String { base + "activity-user:" + user }
}
