import Crypto
import Foundation

/// The keys that sign console sessions. A session lives in Redis, so anyone who can write to Redis
/// could otherwise mint one for any operator; with an HMAC-SHA256 over the session's Redis key and
/// value under a key Redis never holds, a value written by hand is no session.
///
/// The first key signs; every key verifies. To rotate, list the new key first and the old one after
/// it, restart the console, and drop the old key once the sessions it signed have ended (at most
/// ``ConsoleSessions/maximumLifetime``).
public struct SessionKeys: Sendable {
    /// The keys' bytes (SymmetricKey is not Sendable; one is made for each use).
    private let keys: [[UInt8]]
    /// Made up at start because none was configured: sessions end when the console restarts and are
    /// not shared between replicas.
    public let isEphemeral: Bool

    /// A secret shorter than this is refused (`openssl rand -hex 32` makes 64 characters).
    public static let minimumLength = 32

    /// Keys from their text: each at least ``minimumLength`` characters.
    ///
    /// - Throws: ``SessionKeysError`` naming the position (`source`, entry N) of a key that is too short.
    public init(secrets: [String], source: String) throws(SessionKeysError) {
        guard !secrets.isEmpty else { throw SessionKeysError("\(source): holds no key") }
        for (index, secret) in secrets.enumerated() where secret.utf8.count < Self.minimumLength {
            throw SessionKeysError(
                "\(source): key \(index + 1) has \(secret.utf8.count) characters; at least \(Self.minimumLength) are needed (`openssl rand -hex 32`)")
        }
        keys = secrets.map { Array($0.utf8) }
        isEphemeral = false
    }

    private init(ephemeral key: [UInt8]) {
        keys = [key]
        isEphemeral = true
    }

    /// A random key for this process only.
    public static func ephemeral() -> SessionKeys {
        var generator = SystemRandomNumberGenerator()
        return SessionKeys(ephemeral: (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// The keys of a keys file: one a line, the signing key first; blank lines and `#` comments are
    /// skipped.
    public static func load(path: String) throws(SessionKeysError) -> SessionKeys {
        guard let data = FileManager.default.contents(atPath: path) else { throw SessionKeysError("\(path): cannot be read") }
        return try parse(String(decoding: data, as: UTF8.self), source: path)
    }

    public static func parse(_ text: String, source: String) throws(SessionKeysError) -> SessionKeys {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        return try SessionKeys(secrets: lines.filter { !$0.isEmpty && !$0.hasPrefix("#") }, source: source)
    }

    /// The MAC of `message` under the signing key, as 64 hex digits.
    func sign(_ message: [UInt8]) -> String {
        Self.hex(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: keys[0])))
    }

    /// Whether `mac` is the MAC of `message` under any of the keys (compared in constant time).
    func verify(_ message: [UInt8], mac: String) -> Bool {
        guard let given = OperatorCredentials.hexBytes(mac), given.count == SHA256.byteCount else { return false }
        return keys.contains { HMAC<SHA256>.isValidAuthenticationCode(given, authenticating: message, using: SymmetricKey(data: $0)) }
    }

    private static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}

public struct SessionKeysError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
