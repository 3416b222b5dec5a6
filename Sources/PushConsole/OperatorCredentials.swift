import Crypto
import Foundation
import PushCore
import _CryptoExtras

/// Who may use the console: operators (a name and a PBKDF2 password hash) who log in through the
/// page, and API keys (a name and the SHA-256 of the key) for `Authorization: Bearer`.
///
/// The operators file (`PUSH_CONSOLE_OPERATORS_FILE`):
/// ```json
/// {"operators": [{"name": "alice", "password": "pbkdf2-sha256$210000$<salt base64>$<hash base64>",
///                 "scopes": ["read", "send"], "apps": ["com.example.shop"]}],
///  "api_keys": [{"name": "release-bot", "key_sha256": "<64 hex digits>", "scopes": ["send:com.example.shop"]}]}
/// ```
/// Nothing secret is stored: `pushctl console hash-password` and `hash-key` make the values. At least
/// one operator or key is required. `scopes` and `apps` are ``ConsolePermissions``; an entry without
/// `scopes` may do everything (`admin`), as before scopes existed, and ``warnings`` names it.
public struct OperatorCredentials: Sendable {
    public struct Operator: Sendable, Equatable {
        public let name: String
        public let password: PasswordHash
        public let permissions: ConsolePermissions

        public init(name: String, password: PasswordHash, permissions: ConsolePermissions = .admin) {
            self.name = name
            self.password = password
            self.permissions = permissions
        }
    }

    public struct APIKey: Sendable, Equatable {
        public let name: String
        /// SHA-256 of the key.
        public let digest: [UInt8]
        public let permissions: ConsolePermissions

        public init(name: String, digest: [UInt8], permissions: ConsolePermissions = .admin) {
            self.name = name
            self.digest = digest
            self.permissions = permissions
        }
    }

    public let operators: [Operator]
    public let apiKeys: [APIKey]
    /// What start should warn about: entries without `scopes`, which may do everything.
    public let warnings: [String]

    public init(operators: [Operator], apiKeys: [APIKey], warnings: [String] = []) {
        self.operators = operators
        self.apiKeys = apiKeys
        self.warnings = warnings
    }

    /// The permissions of the operator or API key `name`; nil when there is none of that name (an
    /// operator removed from the file since the login).
    public func permissions(of name: String) -> ConsolePermissions? {
        operators.first { $0.name == name }?.permissions ?? apiKeys.first { $0.name == name }?.permissions
    }

    /// - Throws: ``OperatorsFileError`` naming the entry whose `apps` or `scopes` name an app the apps
    ///   file does not have (a typo would silently grant nothing).
    public func check(apps bundleIDs: Set<String>) throws(OperatorsFileError) {
        let entries = operators.map { ($0.name, $0.permissions) } + apiKeys.map { ($0.name, $0.permissions) }
        for (name, permissions) in entries {
            if let unknown = permissions.namedApps.subtracting(bundleIDs).sorted().first {
                throw OperatorsFileError("\(name): names the app \"\(unknown)\", which the apps file does not have")
            }
        }
    }

    /// Reads and checks an operators file.
    ///
    /// - Throws: ``OperatorsFileError`` naming the entry and field.
    public static func load(path: String) throws(OperatorsFileError) -> OperatorCredentials {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw OperatorsFileError("\(path): cannot be read")
        }
        return try parse(Array(data), source: path)
    }

    public static func parse(_ bytes: [UInt8], source: String = "operators file") throws(OperatorsFileError) -> OperatorCredentials {
        let json: JSONValue
        do {
            json = try JSONValue.parse(bytes)
        } catch {
            throw OperatorsFileError("\(source): not valid JSON (\(error))")
        }
        guard case .object = json else { throw OperatorsFileError("\(source): must be a JSON object with \"operators\" and/or \"api_keys\"") }
        var operators: [Operator] = []
        var warnings: [String] = []
        var names = Set<String>()
        func permissions(_ entry: JSONValue, _ path: String, _ name: String) throws(OperatorsFileError) -> ConsolePermissions {
            if let parsed = try ConsolePermissions.parse(scopes: entry["scopes"], apps: entry["apps"], path: path, source: source) {
                return parsed
            }
            warnings.append("\(path) (\(name)) has no scopes, so it may do everything (admin): give it \"scopes\" in \(source)")
            return .admin
        }
        func entries(_ field: String) throws(OperatorsFileError) -> [JSONValue] {
            switch json[field] {
            case nil, .null?: return []
            case .array(let items)?: return items
            default: throw OperatorsFileError("\(source): \(field) must be an array")
            }
        }
        func name(_ entry: JSONValue, _ path: String) throws(OperatorsFileError) -> String {
            guard let name = entry["name"]?.stringValue, !name.isEmpty, name.count <= 64,
                name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.@".contains($0) })
            else {
                throw OperatorsFileError("\(source): \(path).name must be 1–64 letters, digits, '-', '_', '.' or '@'")
            }
            guard names.insert(name).inserted else { throw OperatorsFileError("\(source): \(path).name \"\(name)\" appears twice") }
            return name
        }
        for (index, entry) in try entries("operators").enumerated() {
            let path = "operators[\(index)]"
            let name = try name(entry, path)
            guard let text = entry["password"]?.stringValue else {
                throw OperatorsFileError("\(source): \(path).password is required (a hash from `pushctl console hash-password`)")
            }
            guard let hash = PasswordHash(encoded: text) else {
                throw OperatorsFileError(
                    "\(source): \(path).password must be pbkdf2-sha256$<rounds ≥ 100000>$<salt>$<hash> as `pushctl console hash-password` prints it, not a password"
                )
            }
            operators.append(Operator(name: name, password: hash, permissions: try permissions(entry, path, name)))
        }
        var apiKeys: [APIKey] = []
        for (index, entry) in try entries("api_keys").enumerated() {
            let path = "api_keys[\(index)]"
            let name = try name(entry, path)
            guard let hex = entry["key_sha256"]?.stringValue, let digest = Self.hexBytes(hex), digest.count == 32 else {
                throw OperatorsFileError("\(source): \(path).key_sha256 must be 64 hex digits (`pushctl console hash-key`)")
            }
            apiKeys.append(APIKey(name: name, digest: digest, permissions: try permissions(entry, path, name)))
        }
        guard !operators.isEmpty || !apiKeys.isEmpty else {
            throw OperatorsFileError("\(source): names no operator and no API key; nobody could use the console")
        }
        return OperatorCredentials(operators: operators, apiKeys: apiKeys, warnings: warnings)
    }

    /// Whether `password` is the password of the operator `name` (false for a name that is none).
    /// Costs a PBKDF2 for a known name and nothing for an unknown one: the login page evens out the
    /// timing (``VerificationQueue/typicalCheck``).
    public func verify(name: String, password: String) -> Bool {
        operators.first(where: { $0.name == name })?.password.verify(password) ?? false
    }

    /// The API key `key`; nil when it is none of them.
    public func apiKey(_ key: String) -> APIKey? {
        let digest = Array(SHA256.hash(data: Array(key.utf8)))
        var found: APIKey?
        for entry in apiKeys where PasswordHash.constantTimeEqual(entry.digest, digest) { found = entry }
        return found
    }

    static func hexBytes(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard characters.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < characters.count {
            guard let high = hexValue(characters[index]), let low = hexValue(characters[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The SHA-256 of `key` as 64 lowercase hex digits (`pushctl console hash-key`).
    public static func keyDigestHex(_ key: String) -> String {
        SHA256.hash(data: Array(key.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

/// A PBKDF2-HMAC-SHA256 password hash: `pbkdf2-sha256$<rounds>$<salt base64>$<hash base64>`.
public struct PasswordHash: Sendable, Equatable {
    public let salt: [UInt8]
    public let rounds: Int
    public let hash: [UInt8]

    /// OWASP's 2023 figure for PBKDF2-HMAC-SHA256.
    public static let defaultRounds = 210_000
    static let minimumRounds = 100_000
    static let maximumRounds = 10_000_000

    init(salt: [UInt8], rounds: Int, hash: [UInt8]) {
        self.salt = salt
        self.rounds = rounds
        self.hash = hash
    }

    /// A new hash of `password` with a random 16-byte salt.
    public static func make(password: String, rounds: Int = defaultRounds) -> PasswordHash {
        var generator = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return PasswordHash(salt: salt, rounds: rounds, hash: derive(password, salt: salt, rounds: rounds))
    }

    public init?(encoded: String) {
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "pbkdf2-sha256", let rounds = Int(parts[1]),
            (Self.minimumRounds...Self.maximumRounds).contains(rounds),
            let salt = Data(base64Encoded: String(parts[2])), salt.count >= 8,
            let hash = Data(base64Encoded: String(parts[3])), hash.count == 32
        else { return nil }
        self.init(salt: Array(salt), rounds: rounds, hash: Array(hash))
    }

    public var encoded: String { "pbkdf2-sha256$\(rounds)$\(Data(salt).base64EncodedString())$\(Data(hash).base64EncodedString())" }

    public func verify(_ password: String) -> Bool {
        Self.constantTimeEqual(Self.derive(password, salt: salt, rounds: rounds), hash)
    }

    static func derive(_ password: String, salt: [UInt8], rounds: Int) -> [UInt8] {
        // `unsafeUncheckedRounds`: the bounds are ours (minimumRounds…maximumRounds, checked where a hash
        // is read); the checked variant refuses fewer than 210,000. Fails only for lengths out of range.
        guard
            let key = try? KDF.Insecure.PBKDF2.deriveKey(
                from: Array(password.utf8), salt: salt, using: .sha256, outputByteCount: 32, unsafeUncheckedRounds: rounds)
        else { return [] }
        return key.withUnsafeBytes { Array($0) }
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}

public struct OperatorsFileError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
