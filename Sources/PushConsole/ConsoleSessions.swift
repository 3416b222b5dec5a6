import Crypto
import Foundation
public import Redis

/// Console logins, kept in Redis so every replica of the console knows them and a restart keeps them:
/// `{prefix}:console:session:<SHA-256 of the cookie>` holds `<csrf token> <created ms> <operator> <mac>`
/// and expires ``ttl`` after its last use, and at the latest ``maximumLifetime`` after the login. Only
/// the digest of the cookie is stored. `mac` is an HMAC over the Redis key and the rest of the value
/// under ``SessionKeys`` that Redis never holds: a value written into Redis by hand, or copied
/// under another cookie's key, is no session.
public struct ConsoleSessions: Sendable {
    private let redis: any RedisCommandExecutor
    public let keyPrefix: String
    public let ttl: Duration
    private let keys: SessionKeys

    /// However often it is used, a login lasts no longer than this.
    public static let maximumLifetime: Duration = .seconds(24 * 3600)

    public struct Session: Sendable, Equatable {
        public let operatorName: String
        /// The token every form of this session carries (`csrf`), checked on every POST.
        public let csrf: String
    }

    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push", ttl: Duration, keys: SessionKeys) {
        self.redis = redis
        self.keyPrefix = keyPrefix
        self.ttl = ttl
        self.keys = keys
    }

    public func key(_ cookie: String) -> String {
        "\(keyPrefix):console:session:" + SHA256.hash(data: Array(cookie.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    private var seconds: Int64 { Swift.max(60, ttl.components.seconds) }

    static func milliseconds() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// A new session for `operatorName`; returns the cookie value.
    public func create(operatorName: String) async throws(RedisError) -> (cookie: String, session: Session) {
        let cookie = Self.randomToken()
        let session = Session(operatorName: operatorName, csrf: Self.randomToken())
        let key = key(cookie)
        let fields = "\(session.csrf) \(Self.milliseconds()) \(operatorName)"
        var command: RedisCommand = ["SET", key, "\(fields) \(keys.sign(Self.signed(key: key, fields: fields)))", "EX"]
        command.append(seconds)
        _ = try await redis.execute(command)
        return (cookie, session)
    }

    /// What ``find(_:)`` refuses.
    public enum LookupError: Error, Sendable {
        case redis(RedisError)
        /// The value under the cookie's key is not one the console signed: written by someone else.
        case forged
    }

    /// The session of `cookie`, its lifetime renewed; nil when there is none (expired, logged out,
    /// older than ``maximumLifetime``).
    ///
    /// - Throws: ``LookupError/forged`` for a value no configured key signed. It is left in Redis:
    ///   during a key rotation rolled out replica by replica, another replica may still verify it.
    public func find(_ cookie: String) async throws(LookupError) -> Session? {
        guard cookie.count == 64, cookie.allSatisfy(\.isHexDigit) else { return nil }
        var expire: RedisCommand = ["EXPIRE", key(cookie)]
        expire.append(seconds)
        let replies: [RedisReply]
        do {
            replies = try await redis.pipeline([RedisCommand(["GET", key(cookie)]), expire])
        } catch {
            throw .redis(error)
        }
        guard let value = replies.first?.string else { return nil }
        let parts = value.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 4, keys.verify(Self.signed(key: key(cookie), fields: parts[0..<3].joined(separator: " ")), mac: String(parts[3]))
        else { throw .forged }
        guard let created = Int64(parts[1]), created >= 0 else { return nil }
        let age = Self.milliseconds() - created
        guard age >= 0, age < Int64(Self.maximumLifetime.components.seconds) * 1000 else {
            try? await delete(cookie)
            return nil
        }
        return Session(operatorName: String(parts[2]), csrf: String(parts[0]))
    }

    public func delete(_ cookie: String) async throws(RedisError) {
        _ = try await redis.execute(RedisCommand(["DEL", key(cookie)]))
    }

    /// What the MAC covers: the Redis key (so a value cannot be moved under another cookie) and the
    /// value's fields.
    static func signed(key: String, fields: String) -> [UInt8] {
        Array("push-console-session\n\(key)\n\(fields)".utf8)
    }

    /// 32 random bytes as 64 hex digits.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}
