import Foundation
public import PushCore
public import Redis

/// Moving an app's registry to another layout while the services run (`pushctl registry migrate`):
/// from the single-tag layout of registries made before issue 14 to virtual shards, or from one
/// shard count to another.
///
/// 1. The layout hash says `migrating` (from → to). Services see it within their cache lifetime
///    (``RegistryLayouts/cacheLifetime``); the single-tag layout's scripts refuse writes at once.
///    From then on every write moves its device first (``moveDevice(app:device:from:to:)``) and
///    then writes in the new layout, reads try the new layout first, and scans read the old layout
///    wholly before the new one, so a device that moves meanwhile is found in one of them.
/// 2. Every device of the old layout is moved: its record with its set memberships, its Live
///    Activity tokens with theirs, its tombstone; then the old layout's tombstones of devices
///    already deleted.
/// 3. The layout hash says `settled` (to).
///
/// Each device moves in two scripts, one per shard: an import into the new shard that keeps
/// whatever is newer there (by `updated_at`, and the tombstones' times), then a removal from the old
/// shard, only if the device did not change there since it was read. So a move can be repeated,
/// interrupted and resumed, and run at once by the migration and by a service writing the same
/// device: the migration is resumable and idempotent; running it again finishes what is left.
extension TokenRegistry {
    /// What a migration did.
    public struct MigrationReport: Sendable, Equatable {
        public var from: RegistryLayout?
        public var to: RegistryLayout
        /// Devices moved (those found in the old layout).
        public var devices = 0
        /// Tombstones of deleted devices moved.
        public var tombstones = 0
        /// Passes over the old layout's token sets until they were empty.
        public var passes = 0
    }

    /// Moves `app`'s registry to `target` (see the extension's overview), calling `progress` with a
    /// line now and then. Safe to run again after an interruption, and a no-op when the registry is
    /// already there.
    ///
    /// - Throws: ``RegistryError`` when Redis fails (run it again), or when a migration to another
    ///   layout is in progress.
    public func migrate(
        app: String, to target: RegistryLayout, concurrency: Int = 32, progress: @Sendable (String) -> Void = { _ in }
    ) async throws(RegistryError) -> MigrationReport {
        layouts.invalidate(app: app)
        let state = try await layouts.state(app: app)
        var from: RegistryLayout
        switch state {
        case .migrating(let source, let to):
            guard to == target else {
                throw RegistryError(
                    .serverError, "\(app)'s registry is migrating from \(source) to \(to); finish that migration first (--shards \(to.shards))")
            }
            from = source
        case .settled(let layout) where layout != target:
            from = layout
        case .settled:
            // Already there; a single-tag registry written by a service of an older version during an
            // upgrade is moved all the same.
            guard !target.isLegacy, try await tokenCount(app: app, layout: .legacy) > 0 else {
                return MigrationReport(from: nil, to: target)
            }
            from = .legacy
        }
        var report = MigrationReport(from: from, to: target)
        if state != .migrating(from: from, to: target) {
            try await layouts.write(.migrating(from: from, to: target), app: app)
            progress("\(app): migrating from \(from) to \(target); waiting \(layouts.cacheLifetime * 2) for every service to see it")
            try? await Task.sleep(for: layouts.cacheLifetime * 2 + .milliseconds(500))
        }
        let sources = from.allKeys(prefix: keyPrefix, app: app)
        var left = try await tokenCount(app: app, layout: from)
        while left > 0, report.passes < 10 {
            report.passes += 1
            for keys in sources {
                for try await batch in TokenBatches(redis: redis, keys: [keys.tokens], batchSize: Self.scanBatchSize) {
                    try await moveDevices(app: app, devices: batch, from: from, to: target, concurrency: concurrency)
                    report.devices += batch.count
                    if report.devices % 10_000 < batch.count { progress("\(app): \(report.devices) devices moved") }
                }
            }
            left = try await tokenCount(app: app, layout: from)
        }
        guard left == 0 else {
            throw RegistryError(.serverError, "\(app): \(left) tokens are still in the old layout after \(report.passes) passes; run it again")
        }
        // Devices without a record that have Live Activity tokens, and tombstones of deleted devices.
        for keys in sources {
            for key in try await keysMatching(keys.base + "device-activities:*", on: keys) {
                guard let device = try? DeviceToken(normalizing: String(key.dropFirst((keys.base + "device-activities:").count))) else { continue }
                try await moveDevice(app: app, device: device, from: from, to: target)
                report.devices += 1
            }
            for key in try await keysMatching(keys.base + "gone:*", on: keys) {
                guard let device = try? DeviceToken(normalizing: String(key.dropFirst((keys.base + "gone:").count))) else { continue }
                try await moveDevice(app: app, device: device, from: from, to: target)
                report.tombstones += 1
            }
        }
        try await layouts.write(.settled(target), app: app)
        progress("\(app): settled in \(target): \(report.devices) devices and \(report.tombstones) tombstones moved in \(report.passes) pass(es)")
        return report
    }

    /// Moves one device's data (record, set memberships, Live Activity tokens, tombstone) from its
    /// shard in `from` to its shard in `to`, keeping what is newer in `to`. Nothing to move is no error.
    public func moveDevice(app: String, device: DeviceToken, from: RegistryLayout, to: RegistryLayout) async throws(RegistryError) {
        let source = from.keys(prefix: keyPrefix, app: app, device: device)
        let destination = to.keys(prefix: keyPrefix, app: app, device: device)
        guard source != destination else { return }
        for _ in 0..<5 {
            guard let data = try await exportDevice(device, keys: source) else { return }
            _ = try await run(
                Self.importDeviceScript,
                keys: [destination.record(device), destination.tokens, destination.deviceActivities(device)],
                args: [destination.base, device.hex, data.payload], operation: "move of \(destination.base)token:\(device.redacted)",
                key: destination.record(device))
            let removed = try await run(
                Self.removeMovedDeviceScript,
                keys: [source.record(device), source.tokens, source.deviceActivities(device)],
                args: [source.base, device.hex, data.updatedAt], operation: "move of \(source.base)token:\(device.redacted)",
                key: source.record(device))
            if removed.integer == 1 { return }
            // It changed in the old layout since it was read (a service whose layout was not read
            // anew yet): read it again.
        }
        throw RegistryError(.unavailable, "\(app): \(source.base)token:\(device.redacted) kept changing while it was moved; try again")
    }

    private func moveDevices(
        app: String, devices: [DeviceToken], from: RegistryLayout, to: RegistryLayout, concurrency: Int
    ) async throws(RegistryError) {
        let registry = self
        let failures = await withTaskGroup(of: RegistryError?.self) { group in
            var next = 0
            var running = 0
            var failures: [RegistryError] = []
            while true {
                // Up to `concurrency` moves at once; after a failure no new one starts.
                while running < Swift.max(1, concurrency), next < devices.count, failures.isEmpty {
                    let device = devices[next]
                    next += 1
                    running += 1
                    group.addTask {
                        do throws(RegistryError) {
                            try await registry.moveDevice(app: app, device: device, from: from, to: to)
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
                guard running > 0, let result = await group.next() else { break }
                running -= 1
                if let result { failures.append(result) }
            }
            return failures
        }
        if let first = failures.first { throw first }
    }

    /// The device's data in one shard, as the import script takes it, and its record's `updated_at`
    /// (`""` without a record); nil when the shard holds nothing of it.
    private func exportDevice(_ device: DeviceToken, keys: RegistryKeys) async throws(RegistryError) -> (payload: String, updatedAt: String)? {
        let gone = keys.base + "gone:" + device.hex
        let replies: [RedisReply]
        do {
            replies = try await redis.pipeline([
                ["HGETALL", keys.record(device)], ["GET", gone], ["PTTL", gone], ["HGETALL", keys.deviceActivities(device)],
            ])
        } catch {
            throw RegistryError.redis(error, during: "read of \(keys.base)token:\(device.redacted)", key: keys.record(device))
        }
        let record = Self.pairs(replies[0])
        let slots = Self.pairs(replies[3])
        guard !record.isEmpty || replies[1].string != nil || !slots.isEmpty else { return nil }
        let held = slots.filter { !$0.0.hasPrefix("del:") }
        var activities: [String: Any] = [:]
        if !held.isEmpty {
            let answers: [RedisReply]
            do {
                answers = try await redis.pipeline(
                    held.flatMap { _, token in
                        [
                            RedisCommand(["HGETALL", keys.base + "activity-token:" + token]),
                            RedisCommand(["PEXPIRETIME", keys.base + "activity-token:" + token]),
                        ]
                    })
            } catch {
                throw RegistryError.redis(error, during: "read of \(keys.deviceActivities(device))", key: keys.deviceActivities(device))
            }
            for (index, (_, token)) in held.enumerated() {
                let fields = Self.pairs(answers[2 * index])
                guard !fields.isEmpty else { continue }
                var entry: [String: Any] = ["fields": fields.flatMap { [$0.0, $0.1] }]
                if let at = answers[2 * index + 1].integer, at > 0 { entry["pexpireat"] = at }
                activities[token] = entry
            }
        }
        var object: [String: Any] = [
            "record": record.flatMap { [$0.0, $0.1] }, "slots": held.map { [$0.0, $0.1] },
            "dels": slots.filter { $0.0.hasPrefix("del:") }.map { [$0.0, $0.1] }, "activities": activities,
        ]
        if let at = replies[1].string, let ttl = replies[2].integer, ttl > 0 {
            object["gone"] = at
            object["gone_ttl"] = ttl
        }
        guard let json = try? JSONSerialization.data(withJSONObject: object), let payload = String(data: json, encoding: .utf8) else {
            throw RegistryError(.serverError, "\(keys.record(device)): its data could not be written as JSON")
        }
        return (payload, record.first { $0.0 == "updated_at" }?.1 ?? "")
    }

    /// Field/value pairs of an `HGETALL` reply (binary values as UTF-8 text; the registry stores text).
    private static func pairs(_ reply: RedisReply) -> [(String, String)] {
        guard let elements = reply.array else { return [] }
        var pairs: [(String, String)] = []
        var index = 0
        while index + 1 < elements.count {
            if let field = elements[index].string, let value = elements[index + 1].string { pairs.append((field, value)) }
            index += 2
        }
        return pairs
    }

    /// `SCARD` of every token set of `layout`, summed.
    private func tokenCount(app: String, layout: RegistryLayout) async throws(RegistryError) -> Int {
        let sets = layout.allKeys(prefix: keyPrefix, app: app).map(\.tokens)
        do {
            return try await redis.pipeline(sets.map { RedisCommand(["SCARD", $0]) }).reduce(0) { $0 + Int($1.integer ?? 0) }
        } catch {
            throw RegistryError.redis(error, during: "count of \(app)'s tokens", key: sets[0])
        }
    }

    /// Keys matching `pattern` on the server (or Redis Cluster node) holding `shard`'s keys: one
    /// `SCAN` pass over that server's keyspace.
    private func keysMatching(_ pattern: String, on shard: RegistryKeys) async throws(RegistryError) -> [String] {
        var found: [String] = []
        var cursor = "0"
        repeat {
            let reply: RedisReply
            do {
                reply = try await redis.execute(RedisCommand(["SCAN", cursor, "MATCH", pattern, "COUNT", "1000"]).routed(byKey: shard.tokens))
            } catch {
                throw RegistryError.redis(error, during: "scan for \(pattern)", key: shard.tokens)
            }
            guard let parts = reply.array, parts.count == 2, let next = parts[0].string, let keys = parts[1].array else {
                throw RegistryError.unexpectedReply(reply, during: "scan for \(pattern)")
            }
            found.append(contentsOf: keys.compactMap(\.string))
            cursor = next
        } while cursor != "0"
        return Array(Set(found))
    }

    /// `KEYS[1]` the device's record, `KEYS[2]` the shard's token set, `KEYS[3]` the device's Live
    /// Activity slots, all in the new shard; `ARGV[1]` the shard's base, `ARGV[2]` the device's hex,
    /// `ARGV[3]` the device's data from the old shard (JSON: `record` field/value list, `gone` and
    /// `gone_ttl`, `slots` [[slot, token]], `dels` [[del:slot, ms]], `activities` {token: {fields,
    /// pexpireat}}). Keeps whatever is newer here; returns 1 when the record was taken, else 0.
    static let importDeviceScript = RedisScript(
        leaveIndexSetsLua + "\n" + removeActivityTokenLua + """

            local record, all, slots = KEYS[1], KEYS[2], KEYS[3]
            local base, hex = ARGV[1], ARGV[2]
            local data = cjson.decode(ARGV[3])
            local gone_key = base .. 'gone:' .. hex
            if data.gone then
              local mine = tonumber(redis.call('GET', gone_key))
              if (not mine or tonumber(data.gone) > mine) and tonumber(data.gone_ttl) > 0 then
                redis.call('SET', gone_key, data.gone, 'PX', data.gone_ttl)
              end
            end
            local gone = tonumber(redis.call('GET', gone_key))
            local taken = 0
            if #data.record > 0 then
              local fields = {}
              for i = 1, #data.record, 2 do fields[data.record[i]] = data.record[i + 1] end
              local updated = tonumber(fields.updated_at) or 0
              local mine = tonumber(redis.call('HGET', record, 'updated_at'))
              if (not mine or mine < updated) and (not gone or gone < updated) then
                if redis.call('EXISTS', record) == 1 then
                  leave_index_sets(record, base, hex, false, {})
                  redis.call('DEL', record)
                end
                redis.call('HSET', record, unpack(data.record))
                redis.call('SADD', all, hex)
                if fields.user then redis.call('SADD', base .. 'user:' .. fields.user, hex) end
                if fields.topics then
                  local ok, topics = pcall(cjson.decode, fields.topics)
                  if ok and type(topics) == 'table' then
                    for _, topic in ipairs(topics) do
                      if type(topic) == 'string' then redis.call('SADD', base .. 'topic:' .. topic, hex) end
                    end
                  end
                end
                taken = 1
              end
            end
            for _, pair in ipairs(data.dels) do
              local mine = tonumber(redis.call('HGET', slots, pair[1]))
              if not mine or tonumber(pair[2]) > mine then redis.call('HSET', slots, pair[1], pair[2]) end
            end
            local now = redis.call('TIME')
            local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
            for _, pair in ipairs(data.slots) do
              local slot, token = pair[1], pair[2]
              local activity = data.activities[token]
              if activity and (not activity.pexpireat or tonumber(activity.pexpireat) > now_ms) then
                local fields = {}
                for i = 1, #activity.fields, 2 do fields[activity.fields[i]] = activity.fields[i + 1] end
                local updated = tonumber(fields.updated_at) or 0
                local deleted = tonumber(redis.call('HGET', slots, 'del:' .. slot))
                local token_gone = tonumber(redis.call('GET', base .. 'gone:' .. token))
                local held = redis.call('HGET', slots, slot)
                local held_at = held and tonumber(redis.call('HGET', base .. 'activity-token:' .. held, 'updated_at'))
                local newer_here = (deleted and deleted >= updated) or (token_gone and token_gone >= updated)
                  or (held_at and held_at >= updated) or (gone and gone >= updated)
                if not newer_here then
                  if held then remove_activity_token(base, held) end
                  local key = base .. 'activity-token:' .. token
                  redis.call('DEL', key)
                  redis.call('HSET', key, unpack(activity.fields))
                  redis.call('HSET', slots, slot, token)
                  local sets
                  if fields.kind == 'push_to_start' then
                    sets = {base .. 'pts:' .. (fields.attributes_type or '')}
                    if fields.user then sets[#sets + 1] = base .. 'pts-user:' .. fields.user end
                  else
                    sets = {base .. 'activity:' .. (fields.activity_id or '')}
                    if fields.user then sets[#sets + 1] = base .. 'activity-user:' .. fields.user end
                  end
                  for _, set in ipairs(sets) do redis.call('SADD', set, token) end
                  if activity.pexpireat then
                    local until_ms = tonumber(activity.pexpireat)
                    redis.call('PEXPIREAT', key, until_ms)
                    for _, set in ipairs(sets) do
                      if redis.call('PEXPIRETIME', set) < until_ms then redis.call('PEXPIREAT', set, until_ms) end
                    end
                  end
                end
              end
            end
            return taken
            """
    )

    /// `KEYS[1]` the device's record, `KEYS[2]` the shard's token set, `KEYS[3]` its Live Activity
    /// slots, all in the old shard; `ARGV[1]` the shard's base, `ARGV[2]` the hex, `ARGV[3]` the
    /// record's `updated_at` when it was read (`""`: none). Removes the device's data from the old
    /// shard (no tombstone: the import took it) and returns 1, or 0 when the record changed since.
    static let removeMovedDeviceScript = RedisScript(
        leaveIndexSetsLua + "\n" + removeActivityTokenLua + """

            local record, all, slots = KEYS[1], KEYS[2], KEYS[3]
            local base, hex, expected = ARGV[1], ARGV[2], ARGV[3]
            if (redis.call('HGET', record, 'updated_at') or '') ~= expected then return 0 end
            leave_index_sets(record, base, hex, false, {})
            redis.call('SREM', all, hex)
            redis.call('DEL', record)
            local held = redis.call('HGETALL', slots)
            for i = 1, #held, 2 do
              if string.sub(held[i], 1, 4) ~= 'del:' then remove_activity_token(base, held[i + 1]) end
            end
            redis.call('DEL', slots, base .. 'gone:' .. hex)
            return 1
            """
    )
}
