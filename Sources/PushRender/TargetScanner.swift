public import PushCore
import Redis
import TokenRegistry

/// A resumable position in a request's target: which part (the index into `to.tokens`, the user
/// index of `to.users`, 0 for a topic or `all`) and the `SSCAN` cursor within it.
///
/// Stored in Redis as `<part>:<cursor>` after every confirmed round, so a restarted fan-out
/// continues where the last confirmed round ended.
public struct TargetPosition: Sendable, Hashable {
    public var part: Int
    /// `SSCAN`'s cursor within the part's set; `0` at its start (unused for `to.tokens`).
    public var cursor: String

    public init(part: Int = 0, cursor: String = "0") {
        self.part = part
        self.cursor = cursor
    }

    public static let start = TargetPosition()

    public var encoded: String { "\(part):\(cursor)" }

    public init?(encoded: String) {
        guard let colon = encoded.firstIndex(of: ":"), let part = Int(encoded[..<colon]), part >= 0 else { return nil }
        let cursor = String(encoded[encoded.index(after: colon)...])
        guard !cursor.isEmpty, cursor.allSatisfy(\.isNumber) else { return nil }
        self.init(part: part, cursor: cursor)
    }
}

/// Streams a target's tokens page by page from the registry (`SSCAN` of the user, topic or app set)
/// or from the request itself (`to.tokens`), never holding more than one page per call.
///
/// `SSCAN` guarantees every member present for the whole scan is returned at least once; members
/// added or removed meanwhile may or may not be, and a member may come twice (the fan-out dedupes).
struct TargetScanner: Sendable {
    let redis: any RedisCommandExecutor
    let keys: RegistryKeys
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

    func isFinished(_ position: TargetPosition) -> Bool {
        switch target {
        case .tokens(let tokens): position.part >= tokens.count
        case .users(let users), .activity(.users(let users, _)), .pushToStart(.users(let users)): position.part >= users.count
        case .topic, .all, .activity(.id), .pushToStart(.all), .channel: position.part >= 1
        }
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

    /// The page at `position` and the position after it. Pages may be empty (a sparse `SSCAN` step);
    /// members that are not normalised tokens are counted in `unreadable` and left out.
    func page(at position: TargetPosition) async throws(RedisError) -> (tokens: [DeviceToken], next: TargetPosition, unreadable: Int) {
        let key: String
        switch target {
        case .tokens(let tokens):
            let end = min(tokens.count, position.part + pageSize)
            return (Array(tokens[position.part..<end]), TargetPosition(part: end), 0)
        case .users(let users): key = keys.user(users[position.part])
        case .topic(let topic): key = keys.topic(topic)
        case .all: key = keys.tokens
        case .activity(.id(let id)): key = keys.activityTokens(activityID: id)
        case .activity(.users(let users, _)): key = keys.activityTokens(user: users[position.part])
        case .pushToStart(.all): key = keys.pushToStartTokens(attributesType: attributesType ?? "")
        case .pushToStart(.users(let users)): key = keys.pushToStartTokens(user: users[position.part])
        case .channel: return ([], TargetPosition(part: 1), 0)
        }
        let reply = try await redis.execute("SSCAN", key, position.cursor, "COUNT", String(pageSize))
        guard let elements = reply.array, elements.count == 2, let nextCursor = elements[0].string, let members = elements[1].array else {
            throw RedisError(.protocolError, "unexpected SSCAN reply for \(key): \(reply)")
        }
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(members.count)
        var unreadable = 0
        for member in members {
            if let text = member.string, let token = try? DeviceToken(normalizing: text), token.hex == text {
                tokens.append(token)
            } else {
                unreadable += 1
            }
        }
        let next = nextCursor == "0" ? TargetPosition(part: position.part + 1) : TargetPosition(part: position.part, cursor: nextCursor)
        return (tokens, next, unreadable)
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
/// of tokens with one pipelined `HMGET` per token: one round trip per page, five small values each.
///
/// Live Activity tokens (``TokenRegistry/TokenRegistry/upsertActivityToken(app:device:registration:defaultEnvironment:now:)``)
/// are read from their own records, whose `kind` and `attributes_type` must match the target; they
/// carry no notification settings (ActivityKit has its own switch on the device).
struct DeviceLookup: Sendable {
    let redis: any RedisCommandExecutor
    let keys: RegistryKeys
    var records: Records = .devices

    enum Records: Sendable, Equatable {
        case devices
        /// Activity token records of this `kind` (any when nil), and of this attributes type when one is given.
        case activityTokens(kind: String?, attributesType: String?)
    }

    func devices(_ tokens: [DeviceToken]) async throws(RedisError) -> [LookedUpDevice] {
        guard !tokens.isEmpty else { return [] }
        let commands: [RedisCommand]
        switch records {
        case .devices:
            commands = tokens.map { token in RedisCommand(["HMGET", keys.record(token), "environment", "locale", "alert", "badge", "sound"]) }
        case .activityTokens:
            commands = tokens.map { token in
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
/// possible only where `SSCAN` itself repeats.
struct TokenDeduplicator {
    /// 4 million fingerprints: at most about 64 MB with the set's slack.
    static let defaultCapacity = 4_000_000

    let capacity: Int
    private var seen: Set<UInt64> = []
    private var round: Set<UInt64> = []

    init(capacity: Int = TokenDeduplicator.defaultCapacity) {
        self.capacity = capacity
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
