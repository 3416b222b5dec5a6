import Crypto
import Foundation
public import Redis

/// Console logins, kept in Redis so every replica of the console knows them and a restart keeps them:
/// `{prefix}:console:session:<SHA-256 of the cookie>` holds `<csrf token> <created ms> <operator>`
/// and expires ``ttl`` after its last use, and at the latest ``maximumLifetime`` after the login. Only
/// the digest of the cookie is stored.
public struct ConsoleSessions: Sendable {
    private let redis: any RedisCommandExecutor
    public let keyPrefix: String
    public let ttl: Duration

    /// However often it is used, a login lasts no longer than this.
    public static let maximumLifetime: Duration = .seconds(24 * 3600)

    public struct Session: Sendable, Equatable {
        public let operatorName: String
        /// The token every form of this session carries (`csrf`), checked on every POST.
        public let csrf: String
    }

    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push", ttl: Duration) {
        self.redis = redis
        self.keyPrefix = keyPrefix
        self.ttl = ttl
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
        var command: RedisCommand = ["SET", key(cookie), "\(session.csrf) \(Self.milliseconds()) \(operatorName)", "EX"]
        command.append(seconds)
        _ = try await redis.execute(command)
        return (cookie, session)
    }

    /// The session of `cookie`, its lifetime renewed; nil when there is none (expired, logged out,
    /// older than ``maximumLifetime``).
    public func find(_ cookie: String) async throws(RedisError) -> Session? {
        guard cookie.count == 64, cookie.allSatisfy(\.isHexDigit) else { return nil }
        var expire: RedisCommand = ["EXPIRE", key(cookie)]
        expire.append(seconds)
        let replies = try await redis.pipeline([RedisCommand(["GET", key(cookie)]), expire])
        guard let value = replies.first?.string else { return nil }
        let parts = value.split(separator: " ", maxSplits: 2)
        guard parts.count == 3, let created = Int64(parts[1]), created >= 0 else { return nil }
        let age = Self.milliseconds() - created
        guard age >= 0, age < Int64(Self.maximumLifetime.components.seconds) * 1000 else {
            try await delete(cookie)
            return nil
        }
        return Session(operatorName: String(parts[2]), csrf: String(parts[0]))
    }

    public func delete(_ cookie: String) async throws(RedisError) {
        _ = try await redis.execute(RedisCommand(["DEL", key(cookie)]))
    }

    /// 32 random bytes as 64 hex digits.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}
