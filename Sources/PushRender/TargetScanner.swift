public import PushCore
import Redis
import TokenRegistry

/// A resumable position in a request's target: which part (the index into `to.tokens`, the user
/// index of `to.users`, 0 for a topic or `all`), and within a part whose tokens are in the registry's
/// sets, which layout is being scanned (its shard count: a migrating registry is scanned old layout
/// first) and each of its shards' `SSCAN` cursor, with the `run_id` of the server that cursor
/// belongs to.
///
/// Stored in Redis after every confirmed round (`<part>:<shards>:<cursor>@<run_id>,…`, `-` for a
/// shard already read), so a restarted fan-out continues where the last confirmed round ended.
public struct TargetPosition: Sendable, Hashable {
    public var part: Int
    /// The shard count of the layout being scanned in this part; 0 before it started.
    public var layout: Int
    /// Per shard of ``layout``: the `SSCAN` cursor to continue from (`"0"`: from the start), or nil
    /// once the shard's set is read.
    public var cursors: [String?]
    /// Per shard: the `run_id` of the server that gave its cursor; nil while the cursor is `"0"`.
    public var epochs: [String?]

    public init(part: Int = 0, layout: Int = 0, cursors: [String?] = [], epochs: [String?]? = nil) {
        self.part = part
        self.layout = layout
        self.cursors = cursors
        self.epochs = epochs ?? Array(repeating: nil, count: cursors.count)
    }

    public static let start = TargetPosition()

    /// At the start of the next part.
    func nextPart() -> TargetPosition { TargetPosition(part: part + 1) }

    public var encoded: String {
        let shards = zip(cursors, epochs).map { cursor, epoch in
            guard let cursor else { return "-" }
            return epoch.map { "\(cursor)@\($0)" } ?? cursor
        }
        return "\(part):\(layout):" + shards.joined(separator: ",")
    }

    /// Reads ``encoded``, and the `<part>:<cursor>` of fan-outs from before sharding (with the one
    /// `run_id` they kept beside it, `legacyEpoch`), as a single-tag layout position.
    public init?(encoded: String, legacyEpoch: String? = nil) {
        let fields = encoded.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard let part = Int(fields[0]), part >= 0 else { return nil }
        if fields.count == 2 {
            let cursor = String(fields[1])
            guard !cursor.isEmpty, cursor.allSatisfy(\.isNumber) else { return nil }
            self.init(part: part, layout: 1, cursors: [cursor], epochs: [cursor == "0" ? nil : legacyEpoch])
            return
        }
        guard fields.count == 3, let layout = Int(fields[1]), (0...RegistryLayout.maximumShards).contains(layout) else { return nil }
        var cursors: [String?] = []
        var epochs: [String?] = []
        if layout > 0 {
            for shard in fields[2].split(separator: ",", omittingEmptySubsequences: false) {
                if shard == "-" {
                    cursors.append(nil)
                    epochs.append(nil)
                    continue
                }
                let parts = shard.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
                guard !parts[0].isEmpty, parts[0].allSatisfy(\.isNumber) else { return nil }
                cursors.append(String(parts[0]))
                epochs.append(parts.count == 2 && !parts[1].isEmpty ? String(parts[1]) : nil)
            }
            guard cursors.count == layout else { return nil }
        } else {
            guard fields[2].isEmpty else { return nil }
        }
        self.init(part: part, layout: layout, cursors: cursors, epochs: epochs)
    }
}

/// A token a scan found, with the shard it was found in (nil for `to.tokens`): the record is
/// looked up there, where the scan saw it.
struct ScannedToken: Sendable {
    let token: DeviceToken
    let shard: RegistryKeys?
}

/// Streams a target's tokens page by page from the registry (`SSCAN` of the user's, topic's or
/// app's set in every shard, in one pipeline, which a Redis Cluster client runs on every master at
/// once) or from the request itself (`to.tokens`), never holding more than one page per call.
///
/// `SSCAN` guarantees every member present for the whole scan of a set is returned at least once;
/// members added or removed meanwhile may or may not be, and a member may come twice (the fan-out
/// dedupes). A registry that is migrating is scanned old layout first (``RegistryState/scanOrder``).
///
/// A cursor is only good on the server that gave it (a restarted Redis, or a replica promoted in a
/// failover, rebuilds its sets with another hash seed): each page of a set already under way also
/// asks that set's server for its `run_id`, and a set whose server changed is scanned again from its
/// start (``Page/restarted``; the fan-out's dedupe skips what it already sent).
struct TargetScanner: Sendable {
    let redis: any RedisCommandExecutor
    let keyPrefix: String
    let app: String
    let target: PushTarget
    let pageSize: Int
    /// The payload's `attributes-type`: which push-to-start tokens a `push_to_start` target reaches.
    var attributesType: String?
    /// Whether the request is a Live Activity push: tokens listed in `to.tokens` are then read from
    /// their Live Activity token records (their own environment and locale), not device records.
    var isLiveActivity = false

    /// Whether tokens come from the registry (a token without a record is then skipped) or from
    /// `to.tokens` (a token without a record is sent with the app's defaults).
    var tokensAreListed: Bool {
        if case .tokens = target { return true }
        return false
    }

    private var partCount: Int {
        switch target {
        case .tokens(let tokens): tokens.count
        case .users(let users), .activity(.users(let users, _)), .pushToStart(.users(let users)): users.count
        case .topic, .all, .activity(.id), .pushToStart(.all), .channel: 1
        }
    }

    func isFinished(_ position: TargetPosition) -> Bool {
        position.part >= partCount
    }

    /// Which records the scanned tokens have: device records, or Live Activity token records.
    var records: DeviceLookup.Records {
        switch target {
        case .tokens where isLiveActivity: .activityTokens(kind: nil, attributesType: nil)
        case .tokens, .users, .topic, .all: .devices
        case .activity(.id): .activityTokens(kind: ActivityTokenSlot.activity(id: "").kind, attributesType: nil)
        case .activity(.users(_, let type)): .activityTokens(kind: ActivityTokenSlot.activity(id: "").kind, attributesType: type)
        case .pushToStart: .activityTokens(kind: ActivityTokenSlot.pushToStart(attributesType: "").kind, attributesType: attributesType)
        case .channel: .devices
        }
    }

    /// The set a part reads, in one shard.
    private func set(part: Int, in keys: RegistryKeys) -> String {
        switch target {
        case .users(let users): keys.user(users[part])
        case .topic(let topic): keys.topic(topic)
        case .activity(.id(let id)): keys.activityTokens(activityID: id)
        case .activity(.users(let users, _)): keys.activityTokens(user: users[part])
        case .pushToStart(.all): keys.pushToStartTokens(attributesType: attributesType ?? "")
        case .pushToStart(.users(let users)): keys.pushToStartTokens(user: users[part])
        case .all, .tokens, .channel: keys.tokens
        }
    }

    /// One page: the tokens found, where the scan goes on, members that are not normalised tokens
    /// (counted, left out), and whether a set was started again because its server changed.
    struct Page: Sendable {
        var tokens: [ScannedToken] = []
        var next: TargetPosition
        var unreadable = 0
        var restarted = false
    }

    /// The page at `position`, with the registry in `state`. Pages may be empty (sparse `SSCAN`
    /// steps, a layout just finished).
    func page(at position: TargetPosition, state: RegistryState) async throws(RedisError) -> Page {
        if case .tokens(let tokens) = target {
            let end = min(tokens.count, position.part + pageSize)
            return Page(tokens: tokens[position.part..<end].map { ScannedToken(token: $0, shard: nil) }, next: TargetPosition(part: end))
        }
        if case .channel = target { return Page(next: position.nextPart()) }
        // The layout this part is in: the position's, while the state still has it; else the first.
        let stages = state.scanOrder
        var position = position
        let stage: Int
        if position.layout > 0, let index = stages.firstIndex(where: { $0.shards == position.layout }) {
            stage = index
        } else {
            stage = 0
            position = Self.begin(part: position.part, layout: stages[0])
        }
        let shards = stages[stage].allKeys(prefix: keyPrefix, app: app)
        let active = position.cursors.indices.filter { position.cursors[$0] != nil }
        var page = Page(next: position)
        guard !active.isEmpty else {
            page.next = stage + 1 < stages.count ? Self.begin(part: position.part, layout: stages[stage + 1]) : position.nextPart()
            return page
        }
        // About `pageSize` tokens a page whatever the shard count (each set's share of it).
        let count = Swift.max(10, pageSize / active.count)
        // INFO server beside the SSCAN of each set whose cursor is under way; SSCAN alone for a set
        // starting (most sets of a user or a small topic end in one step).
        var commands: [RedisCommand] = []
        for shard in active {
            let key = set(part: position.part, in: shards[shard])
            if position.epochs[shard] != nil { commands.append(RedisCommand(["INFO", "server"]).routed(byKey: key)) }
            commands.append(["SSCAN", key, position.cursors[shard]!, "COUNT", String(count)])
        }
        let replies = try await redis.pipeline(commands)
        var index = 0
        var needEpoch: [Int] = []
        for shard in active {
            let key = set(part: position.part, in: shards[shard])
            var serverChanged = false
            if let expected = position.epochs[shard] {
                serverChanged = try Self.runID(replies[index]) != expected
                index += 1
            }
            let reply = replies[index]
            index += 1
            guard let elements = reply.array, elements.count == 2, let nextCursor = elements[0].string, let members = elements[1].array else {
                throw RedisError(.protocolError, "unexpected SSCAN reply for \(key): \(reply)")
            }
            for member in members {
                if let text = member.string, let token = try? DeviceToken(normalizing: text), token.hex == text {
                    page.tokens.append(ScannedToken(token: token, shard: shards[shard]))
                } else {
                    page.unreadable += 1
                }
            }
            if serverChanged {
                // Its server restarted or was replaced: the cursor is void; read the set again.
                page.restarted = true
                page.next.cursors[shard] = "0"
                page.next.epochs[shard] = nil
            } else if nextCursor == "0" {
                page.next.cursors[shard] = nil
                page.next.epochs[shard] = nil
            } else {
                page.next.cursors[shard] = nextCursor
                if position.epochs[shard] == nil { needEpoch.append(shard) }
            }
        }
        if !needEpoch.isEmpty {
            // The server that gave these first cursors (asked right after them).
            let infos = try await redis.pipeline(
                needEpoch.map { RedisCommand(["INFO", "server"]).routed(byKey: set(part: position.part, in: shards[$0])) })
            for (shard, info) in zip(needEpoch, infos) { page.next.epochs[shard] = try Self.runID(info) }
        }
        return page
    }

    /// The start of `part` in `layout`: every shard's cursor at `"0"`.
    static func begin(part: Int, layout: RegistryLayout) -> TargetPosition {
        TargetPosition(part: part, layout: layout.shards, cursors: Array(repeating: "0", count: layout.shards))
    }

    /// The `run_id` line of an `INFO server` reply.
    static func runID(_ reply: RedisReply) throws(RedisError) -> String {
        guard let text = reply.string, let line = text.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("run_id:") }) else {
            throw RedisError(.protocolError, "INFO server named no run_id: \(reply)")
        }
        return String(line.dropFirst("run_id:".count).filter { !$0.isWhitespace })
    }
}

/// What the registry says about one token, as far as rendering cares.
enum LookedUpDevice: Sendable, Equatable {
    case registered(environment: AppConfiguration.Environment, locale: String?, settings: NotificationSettings)
    case unregistered
    /// The record exists but its `environment` is not one this system writes.
    case unreadable
    /// A Live Activity token of another kind or attributes type than the request's (a user's
    /// push-to-start token for another activity type): not part of the target, not counted.
    case notTargeted
}

/// Reads the fields rendering needs (`environment`, `locale`, `alert`, `badge`, `sound`) for a page
/// of tokens with one pipelined `HMGET` per token: one round trip per page (per master, at once, on
/// a Redis Cluster), five small values each.
///
/// A scanned token's record is read in the shard its set is in (for a Live Activity token, its
/// device's shard). A listed token (`to.tokens`) is read where its shard is in each layout the
/// registry may be in, the layout writes go to first; a listed Live Activity token, whose device is
/// not known, in every shard.
///
/// Live Activity tokens (``TokenRegistry/TokenRegistry/upsertActivityToken(app:device:registration:defaultEnvironment:now:)``)
/// are read from their own records, whose `kind` and `attributes_type` must match the target; they
/// carry no notification settings (ActivityKit has its own switch on the device).
struct DeviceLookup: Sendable {
    let redis: any RedisCommandExecutor
    let keyPrefix: String
    let app: String
    var records: Records = .devices

    enum Records: Sendable, Equatable {
        case devices
        /// Activity token records of this `kind` (any when nil), and of this attributes type when one is given.
        case activityTokens(kind: String?, attributesType: String?)
    }

    func devices(_ tokens: [ScannedToken], state: RegistryState) async throws(RedisError) -> [LookedUpDevice] {
        guard !tokens.isEmpty else { return [] }
        // Where each token's record may be, the likeliest first.
        let candidates = tokens.map { scanned -> [RegistryKeys] in
            if let shard = scanned.shard { return [shard] }
            switch records {
            case .devices: return state.readOrder.map { $0.keys(prefix: keyPrefix, app: app, device: scanned.token) }
            case .activityTokens:
                return state.readOrder.flatMap { layout in
                    let own = layout.shard(of: scanned.token)
                    let all = layout.allKeys(prefix: keyPrefix, app: app)
                    return [all[own]] + all.enumerated().filter { $0.offset != own }.map(\.element)
                }
            }
        }
        var found = try await read(zip(tokens, candidates).map { ($0.token, $1[0]) })
        let again = found.indices.filter { found[$0] == .unregistered && candidates[$0].count > 1 }
        if !again.isEmpty {
            let calls = again.flatMap { index in candidates[index].dropFirst().map { (tokens[index].token, $0) } }
            let answers = try await read(calls)
            var cursor = 0
            for index in again {
                let tried = candidates[index].count - 1
                if let hit = answers[cursor..<(cursor + tried)].first(where: { $0 != .unregistered }) { found[index] = hit }
                cursor += tried
            }
        }
        return found
    }

    private func read(_ calls: [(DeviceToken, RegistryKeys)]) async throws(RedisError) -> [LookedUpDevice] {
        let commands: [RedisCommand]
        switch records {
        case .devices:
            commands = calls.map { token, keys in RedisCommand(["HMGET", keys.record(token), "environment", "locale", "alert", "badge", "sound"]) }
        case .activityTokens:
            commands = calls.map { token, keys in
                RedisCommand(["HMGET", keys.activityRecord(token), "environment", "locale", "kind", "attributes_type", "expires_at"])
            }
        }
        let replies = try await redis.pipeline(commands)
        return try replies.map { reply throws(RedisError) in
            if let message = reply.errorMessage {
                if message.hasPrefix("WRONGTYPE") { return .unreadable }
                throw RedisError(.serverError, message)
            }
            guard let fields = reply.array, fields.count == 5 else {
                throw RedisError(.protocolError, "unexpected HMGET reply: \(reply)")
            }
            guard let environmentName = fields[0].string else {
                return fields.allSatisfy(\.isNull) ? .unregistered : .unreadable
            }
            guard let environment = AppConfiguration.Environment(rawValue: environmentName) else { return .unreadable }
            if case .activityTokens(let kind, let attributesType) = records {
                guard kind == nil || fields[2].string == kind, attributesType == nil || fields[3].string == attributesType else {
                    return .notTargeted
                }
                return .registered(environment: environment, locale: fields[1].string, settings: NotificationSettings())
            }
            return .registered(
                environment: environment,
                locale: fields[1].string,
                settings: NotificationSettings(alert: fields[2].string != "0", badge: fields[3].string != "0", sound: fields[4].string != "0")
            )
        }
    }
}

/// Remembers which tokens a fan-out already put into a batch, as 64-bit fingerprints (8 bytes a token
/// instead of the token), so a token `SSCAN` returns twice is sent once.
///
/// Exact up to ``capacity`` distinct tokens per fan-out (two tokens sharing a fingerprint — odds
/// about n²/2⁶⁵, 3·10⁻⁸ for a million tokens — would drop the second). Past the capacity, new
/// fingerprints are only kept for the current round, so repeats within a round (hence within a batch)
/// are still caught. A resumed fan-out starts with an empty set: repeats across the resume point are
/// possible only where `SSCAN` itself repeats. Only tokens that are sent are remembered: one skipped
/// as unregistered (it may have moved to another shard of a migrating registry meanwhile) is sent if
/// it turns up again.
struct TokenDeduplicator {
    /// 4 million fingerprints: at most about 64 MB with the set's slack.
    static let defaultCapacity = 4_000_000

    let capacity: Int
    private var seen: Set<UInt64> = []
    private var round: Set<UInt64> = []

    init(capacity: Int = TokenDeduplicator.defaultCapacity) {
        self.capacity = capacity
    }

    /// Whether the token with `fingerprint` was sent by this fan-out already (without recording it).
    func contains(fingerprint: UInt64) -> Bool {
        seen.contains(fingerprint) || round.contains(fingerprint)
    }

    /// Whether `token` is new to this fan-out (and records it).
    mutating func insert(_ token: DeviceToken) -> Bool {
        insert(fingerprint: Self.fingerprint(token.hex))
    }

    /// ``insert(_:)`` with the token's ``fingerprint(_:)`` already computed.
    mutating func insert(fingerprint: UInt64) -> Bool {
        if seen.contains(fingerprint) { return false }
        if seen.count < capacity {
            seen.insert(fingerprint)
            return true
        }
        return round.insert(fingerprint).inserted
    }

    /// Records fingerprints of tokens rendered before (a resume after a Redis restart), so they are
    /// not rendered again.
    mutating func preload(_ fingerprints: [UInt64]) {
        for fingerprint in fingerprints.prefix(capacity) { seen.insert(fingerprint) }
    }

    /// Forgets the round-only fingerprints (called between rounds).
    mutating func endRound() {
        round.removeAll(keepingCapacity: true)
    }

    /// FNV-1a over the hex digits, finished with a SplitMix64 mix so similar tokens spread out.
    static func fingerprint(_ hex: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in hex.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        hash ^= hash >> 30
        hash = hash &* 0xbf58_476d_1ce4_e5b9
        hash ^= hash >> 27
        hash = hash &* 0x94d0_49bb_1331_11eb
        hash ^= hash >> 31
        return hash
    }
}
