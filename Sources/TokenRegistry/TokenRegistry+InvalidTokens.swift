public import PushCore
import Redis

/// CONTRACT.md's invalid-token rule for many tokens at once, for push-feedback: one pipelined write of
/// one Lua call per token, so a batch of feedback costs one round trip to Redis.
///
/// Each call does what ``TokenRegistry/deleteIfNotRegistered(since:app:token:)`` does — the token is
/// removed (record, user, topic and app sets, atomically) only if it was not registered again after
/// the report's moment — and also leaves a short-lived *removal note* (`{prefix}:{<tag>}:removed:<hex>`,
/// a string `<at ms> <reason>` that expires after `noteLifetime`). A report that finds no record but a
/// note learns that an earlier delivery of the same report removed the token, so a consumer that
/// crashed (or whose event publish failed) after the removal can still announce it when the report is
/// redelivered, keeping `token.removed` at least once.
extension TokenRegistry {
    /// Runs the invalid-token rule for every report, in one pipeline.
    ///
    /// - Parameters:
    ///   - reports: what to remove; several apps may be mixed.
    ///   - now: ms since 1970, stored in removal notes.
    ///   - noteLifetime: how long removal notes live; `nil` or zero leaves none (and reads none).
    /// - Returns: one result per report, in order. A report fails alone when Redis answered its call with
    ///   an error (a `WRONGTYPE` key is ``RegistryError/Code/corruptRecord``).
    /// - Throws: ``RegistryError`` when the pipeline as a whole failed (Redis unreachable, timed out):
    ///   then any of the reports may or may not have been applied, and repeating them is safe.
    public func removeIfNotRegistered(
        _ reports: [InvalidTokenReport],
        now: Int64,
        noteLifetime: Duration?
    ) async throws(RegistryError) -> [Result<InvalidTokenOutcome, RegistryError>] {
        guard !reports.isEmpty else { return [] }
        let lifetime =
            noteLifetime.map { duration -> Int64 in
                let (seconds, attoseconds) = duration.components
                return Swift.max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
            } ?? 0
        var outcomes = try await removeOnce(reports, now: now, lifetime: lifetime)
        // The single-tag layout refused some (a migration started): once more, with the layout read anew.
        let refused = outcomes.indices.filter { if case .failure(let error) = outcomes[$0] { error.isLayoutRefusal } else { false } }
        if !refused.isEmpty {
            for app in Set(refused.map { reports[$0].app }) { layouts.invalidate(app: app) }
            let again = try await removeOnce(refused.map { reports[$0] }, now: now, lifetime: lifetime)
            for (index, outcome) in zip(refused, again) { outcomes[index] = outcome }
        }
        return outcomes
    }

    /// One pass of ``removeIfNotRegistered(_:now:noteLifetime:)``: each report on its token's shard,
    /// then, for the tokens no shard of theirs knew, a look through the other shards for a Live
    /// Activity token (it lives on its device's shard) or a removal note.
    private func removeOnce(
        _ reports: [InvalidTokenReport], now: Int64, lifetime: Int64
    ) async throws(RegistryError) -> [Result<InvalidTokenOutcome, RegistryError>] {
        var states: [String: RegistryState] = [:]
        for app in Set(reports.map(\.app)) { states[app] = try await layouts.state(app: app) }
        for report in reports {
            if let state = states[report.app], let from = state.source {
                try await moveDevice(app: report.app, device: report.token, from: from, to: state.target)
            }
        }
        let placed = reports.map { report -> RegistryKeys in
            states[report.app]!.target.keys(prefix: keyPrefix, app: report.app, device: report.token)
        }
        let replies = try await runRemovals(zip(reports, placed).map { ($0, $1) }, now: now, lifetime: lifetime, states: states)
        var outcomes = zip(zip(reports, placed), replies).map { pair, reply in Self.outcome(reply, report: pair.0, keys: pair.1) }

        // Not found on its own shard: a Live Activity token elsewhere, or a note another shard keeps.
        let unknown = outcomes.indices.filter { index in
            guard case .success(.notFound(nil)) = outcomes[index] else { return false }
            return states[reports[index].app]!.target.shards > 1
        }
        guard !unknown.isEmpty else { return outcomes }
        var probes: [RedisCommand] = []
        var probed: [(index: Int, shards: [RegistryKeys])] = []
        for index in unknown {
            let report = reports[index]
            let others = states[report.app]!.target.allKeys(prefix: keyPrefix, app: report.app).filter { $0 != placed[index] }
            probed.append((index, others))
            for keys in others {
                probes.append(["EXISTS", keys.activityRecord(report.token)])
                probes.append(["GET", keys.removalNote(report.token)])
            }
        }
        let answers: [RedisReply]
        do {
            answers = try await redis.pipeline(probes)
        } catch {
            throw RegistryError.redis(error, during: "invalid-token lookup of \(unknown.count) tokens", key: placed[unknown[0]].tokens)
        }
        var cursor = 0
        var elsewhere: [(index: Int, keys: RegistryKeys)] = []
        for (index, shards) in probed {
            var note: String?
            var holder: RegistryKeys?
            for keys in shards {
                if answers[cursor].integer == 1, holder == nil { holder = keys }
                if let text = answers[cursor + 1].string, note == nil { note = text }
                cursor += 2
            }
            if let holder {
                elsewhere.append((index, holder))
            } else if let note {
                outcomes[index] = .success(.notFound(earlierRemoval: EarlierRemoval(note: note)))
            }
        }
        guard !elsewhere.isEmpty else { return outcomes }
        let again = try await runRemovals(elsewhere.map { (reports[$0.index], $0.keys) }, now: now, lifetime: lifetime, states: states)
        for ((index, keys), reply) in zip(elsewhere, again) { outcomes[index] = Self.outcome(reply, report: reports[index], keys: keys) }
        return outcomes
    }

    /// One pipelined script call per (report, shard).
    private func runRemovals(
        _ calls: [(InvalidTokenReport, RegistryKeys)], now: Int64, lifetime: Int64, states: [String: RegistryState]
    ) async throws(RegistryError) -> [RedisReply] {
        let script = Self.removeIfNotRegisteredScript
        let commands = calls.map { report, keys -> RedisCommand in
            var command: RedisCommand = ["EVALSHA", script.sha1]
            let fenced = states[report.app]!.target.isLegacy
            command.append(fenced ? 4 : 3)
            command.append(contentsOf: [keys.record(report.token), keys.tokens, keys.removalNote(report.token)])
            if fenced { command.append(RegistryKeys.layoutKey(prefix: keyPrefix, app: report.app)) }
            command.append(keys.base)
            command.append(report.token.hex)
            command.append(report.invalidSince)
            command.append("\(now) \(report.reason)")
            command.append(lifetime)
            return command
        }
        do {
            return try await redis.pipelineScript(script, commands)
        } catch {
            throw RegistryError.redis(error, during: "invalid-token removal of \(calls.count) tokens", key: calls[0].1.tokens)
        }
    }

    private static func outcome(_ reply: RedisReply, report: InvalidTokenReport, keys: RegistryKeys) -> Result<InvalidTokenOutcome, RegistryError> {
        let recordKey = keys.record(report.token)
        let operation = "invalid-token removal of \(keys.base)token:\(report.token.redacted)"
        if let message = reply.errorMessage {
            return .failure(RegistryError.redis(RedisError(.serverError, message), during: operation, key: recordKey))
        }
        guard let elements = reply.array, let kind = elements.first?.integer else {
            return .failure(RegistryError.unexpectedReply(reply, during: operation))
        }
        switch kind {
        case 0:
            guard elements.count == 2, let note = elements[1].string else { return .success(.notFound(earlierRemoval: nil)) }
            return .success(.notFound(earlierRemoval: EarlierRemoval(note: note)))
        case 1:
            guard elements.count == 2, let updatedAt = elements[1].integer else {
                return .failure(
                    RegistryError.corrupt(
                        key: recordKey, field: "updated_at", "must be ms since 1970, got \(elements.dropFirst().first.map { "\($0)" } ?? "nothing")"))
            }
            return .success(.keptRegisteredAfter(updatedAt))
        case 2:
            return .success(.removed(user: elements.count == 2 ? elements[1].string : nil))
        default:
            return .failure(RegistryError.unexpectedReply(reply, during: operation))
        }
    }

    /// ``deleteIfNotRegisteredScript`` plus removal notes, with the record read once (one `HMGET`
    /// instead of four calls: this runs for every feedback event). `KEYS[3]` = the note's key;
    /// `ARGV[4]` = the note (`<now> <reason>`), `ARGV[5]` = its lifetime in ms (0: none). Returns `{0}`
    /// or `{0, note}` (no record), `{1, updated_at}` (kept), `{2}` or `{2, user}` (removed). Like the
    /// single-token script, a record without a readable `updated_at` is removed, and a `topics` field
    /// that is not a JSON array is skipped.
    ///
    /// A token with no device record may be a Live Activity token (``upsertActivityToken(app:device:registration:defaultEnvironment:now:)``):
    /// its record is removed by the same rule, from its sets and its device's slot.
    static let removeIfNotRegisteredScript = RedisScript(
        layoutFenceLua + removeActivityTokenLua + "\n" + removeDeviceActivityTokensLua + """

            if layout_moved(KEYS[4]) then \(layoutRefusal) end
            local record, all, removed = KEYS[1], KEYS[2], KEYS[3]
            local base, token, since, note, lifetime = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
            local held = redis.call('HMGET', record, 'updated_at', 'user', 'topics')
            if not held[1] and not held[2] and not held[3] and redis.call('EXISTS', record) == 0 then
              redis.call('SREM', all, token)
              local activity_record = base .. 'activity-token:' .. token
              if redis.call('EXISTS', activity_record) == 1 then
                -- A Live Activity token; one without a readable updated_at cannot prove a newer
                -- registration, so it is removed, like a device record.
                local activity_updated = redis.call('HGET', activity_record, 'updated_at')
                if tonumber(activity_updated) and tonumber(activity_updated) > since then return {1, activity_updated} end
                local user = remove_activity_token(base, token)
                if lifetime > 0 then redis.call('SET', removed, note, 'PX', lifetime) end
                if user then return {2, user} end
                return {2}
              end
              if lifetime > 0 then
                local earlier = redis.call('GET', removed)
                if earlier then return {0, earlier} end
              end
              return {0}
            end
            local updated_at = held[1] and tonumber(held[1])
            if updated_at and updated_at > since then
              return {1, held[1]}
            end
            if held[2] then redis.call('SREM', base .. 'user:' .. held[2], token) end
            if held[3] then
              local ok, topics = pcall(cjson.decode, held[3])
              if ok and type(topics) == 'table' then
                for _, topic in ipairs(topics) do
                  if type(topic) == 'string' then redis.call('SREM', base .. 'topic:' .. topic, token) end
                end
              end
            end
            redis.call('SREM', all, token)
            remove_device_activity_tokens(base, token, since)
            redis.call('DEL', record)
            if lifetime > 0 then redis.call('SET', removed, note, 'PX', lifetime) end
            if held[2] then return {2, held[2]} end
            return {2}
            """
    )
}

/// What ``TokenRegistry/removeIfNotRegistered(_:now:noteLifetime:)`` did with one report.
public enum InvalidTokenOutcome: Sendable, Equatable {
    /// Removed with its set memberships; `user` is who had registered it, if anyone.
    case removed(user: String?)
    /// Registered again after the report's moment, at this time (ms since 1970): kept.
    case keptRegisteredAfter(Int64)
    /// No record. `earlierRemoval` is set when a removal note says this registry removed it recently
    /// (an earlier delivery of the same report, or another report for the token).
    case notFound(earlierRemoval: EarlierRemoval?)
}

/// A removal note: when and why the token was removed.
public struct EarlierRemoval: Sendable, Hashable {
    /// ms since 1970.
    public var at: Int64
    public var reason: String

    public init(at: Int64, reason: String) {
        self.at = at
        self.reason = reason
    }

    /// Reads `<at> <reason>`; a note that does not parse still says the token was removed.
    init(note: String) {
        let parts = note.split(separator: " ", maxSplits: 1)
        self.at = parts.first.flatMap { Int64($0) } ?? 0
        self.reason = parts.count == 2 ? String(parts[1]) : "Unknown"
    }
}

extension RegistryKeys {
    /// The removal note of `token` (see ``TokenRegistry/removeIfNotRegistered(_:now:noteLifetime:)``):
    /// a string that expires on its own.
    public func removalNote(_ token: DeviceToken) -> String { base + "removed:" + token.hex }
}

// MARK: Resumable scans

extension TokenRegistry {
    /// One `SSCAN` page of `app`'s token sets from `cursor` (`"0"` starts a pass over every shard),
    /// for scans that must survive a restart (the stale-token sweep keeps the cursor in Redis).
    /// ``tokens(app:)`` is the simpler choice for one pass in one process.
    ///
    /// - Returns: the page's tokens, members that are not normalised tokens (left alone, for the caller
    ///   to report), and the cursor to continue from (`"0"`: the pass is complete).
    public func tokenPage(app: String, cursor: String, count: Int) async throws(RegistryError) -> (tokens: [DeviceToken], foreign: Int, next: String)
    {
        // The cursor is `<shard>:<SSCAN cursor>` over the shards in scan order (`0` starts a pass;
        // a bare SSCAN cursor, as sweeps before shards saved it, is shard 0's).
        let shards = try await allKeys(app: app)
        var shard = 0
        var position = cursor
        if let colon = cursor.firstIndex(of: ":"), let index = Int(cursor[..<colon]), index >= 0 {
            shard = index
            position = String(cursor[cursor.index(after: colon)...])
        }
        guard shard < shards.count, !position.isEmpty, position.allSatisfy(\.isNumber) else { return ([], 0, "0") }
        let key = shards[shard].tokens
        let reply: RedisReply
        do {
            reply = try await redis.execute("SSCAN", key, position, "COUNT", String(Swift.max(1, count)))
        } catch {
            throw RegistryError.redis(error, during: "scan of \(key)", key: key)
        }
        guard let parts = reply.array, parts.count == 2, let after = parts[0].string, let members = parts[1].array else {
            throw RegistryError.unexpectedReply(reply, during: "scan of \(key)")
        }
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(members.count)
        var foreign = 0
        for member in members {
            if let text = member.string, let token = try? DeviceToken(normalizing: text), token.hex == text {
                tokens.append(token)
            } else {
                foreign += 1
            }
        }
        let next = after != "0" ? "\(shard):\(after)" : shard + 1 < shards.count ? "\(shard + 1):0" : "0"
        return (tokens, foreign, next)
    }
}
