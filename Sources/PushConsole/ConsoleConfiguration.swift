import Foundation
public import PushServiceKit

/// push-console's own settings (the shared ones are ``PushServiceKit/PushConfiguration``'s):
///
/// | key | field | default |
/// |---|---|---|
/// | `PUSH_CONSOLE_OPERATORS_FILE` | ``operatorsFile`` | none: required (the console has no default password) |
/// | `PUSH_CONSOLE_SESSION_TTL_S` | ``sessionTTL`` | `28800` (8 hours) |
/// | `PUSH_CONSOLE_SECURE_COOKIES` | ``secureCookies`` | `false`; `true` behind TLS |
/// | `PUSH_CONSOLE_SESSION_KEYS_FILE` | ``sessionKeysFile`` | none: a key made at start |
/// | `PUSH_CONSOLE_SESSION_SECRETS` | ``sessionSecrets`` | none |
/// | `PUSH_CONSOLE_TRUSTED_PROXIES` | ``trustedProxies`` | none |
/// | `PUSH_CONSOLE_MAX_CONNECTIONS` | ``maxConnections`` | `256` |
/// | `PUSH_CONSOLE_REQUEST_TIMEOUT_S` | ``requestTimeout`` | `10` |
public struct ConsoleConfiguration: Sendable, Hashable {
    /// The operators and API keys (``OperatorCredentials``).
    public var operatorsFile: String
    /// How long a login lasts without use.
    public var sessionTTL: Duration
    /// Marks the session cookie `Secure` (only sent over HTTPS).
    public var secureCookies: Bool

    /// A file of the keys that sign sessions (``SessionKeys``), one a line, the signing key first.
    public var sessionKeysFile: String
    /// The same keys given inline, comma-separated (for an environment without files).
    public var sessionSecrets: String
    /// Proxies (addresses, CIDR ranges) whose `X-Forwarded-For` names the client, for the login
    /// budget per address and the audit log.
    public var trustedProxies: TrustedProxies = .none
    /// Connections served at once (more wait in the listen backlog); an idle connection closes
    /// after 60 s.
    public var maxConnections: Int = 256
    /// How long a request (head and body) may take to arrive from its first byte: a client that
    /// sends it a byte at a time is cut off, so slow clients cannot hold every connection.
    public var requestTimeout: Duration = .seconds(10)

    public init(
        operatorsFile: String = "", sessionTTL: Duration = .seconds(8 * 3600), secureCookies: Bool = false, sessionKeysFile: String = "",
        sessionSecrets: String = ""
    ) {
        self.operatorsFile = operatorsFile
        self.sessionTTL = sessionTTL
        self.secureCookies = secureCookies
        self.sessionKeysFile = sessionKeysFile
        self.sessionSecrets = sessionSecrets
    }

    /// The keys that sign sessions: from ``sessionKeysFile``, else ``sessionSecrets``, else one made
    /// up for this process (``SessionKeys/isEphemeral``: logins end when the console restarts).
    ///
    /// - Throws: ``PushServiceKit/ConfigurationError`` naming the key, for a file that cannot be read or
    ///   a key that is too short.
    public func sessionKeys() throws(ConfigurationError) -> SessionKeys {
        do {
            if !sessionKeysFile.isEmpty { return try SessionKeys.load(path: sessionKeysFile) }
            if !sessionSecrets.isEmpty {
                return try SessionKeys(
                    secrets: sessionSecrets.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }, source: "the value")
            }
        } catch {
            let key = sessionKeysFile.isEmpty ? "PUSH_CONSOLE_SESSION_SECRETS" : "PUSH_CONSOLE_SESSION_KEYS_FILE"
            throw ConfigurationError.invalidValue(
                key: key, value: sessionKeysFile.isEmpty ? "<redacted>" : sessionKeysFile, problem: error.description)
        }
        return SessionKeys.ephemeral()
    }

    /// push-console's port when `PUSH_HTTP_PORT` is not set.
    public static let defaultHTTPPort = 8090

    public static let table = ConfigurationTable<ConsoleConfiguration>(
        "push-console",
        [
            ConfigurationKey(
                "PUSH_CONSOLE_OPERATORS_FILE", "JSON file of operators (name, PBKDF2 password hash) and API keys; required",
                default: { $0.operatorsFile.isEmpty ? "none (required)" : $0.operatorsFile }
            ) { reader, settings, defaults throws(ConfigurationError) in
                settings.operatorsFile = reader.string("PUSH_CONSOLE_OPERATORS_FILE", default: defaults.operatorsFile)
            },
            .seconds("PUSH_CONSOLE_SESSION_TTL_S", \.sessionTTL, "seconds a login lasts without use"),
            .bool("PUSH_CONSOLE_SECURE_COOKIES", \.secureCookies, "mark the session cookie Secure (set true behind TLS)"),
            ConfigurationKey(
                "PUSH_CONSOLE_SESSION_KEYS_FILE",
                "file of the keys that sign sessions, one a line (32+ characters each), the signing key first, old ones after it",
                default: { $0.sessionKeysFile.isEmpty ? "none (a key made at start: logins end at a restart)" : $0.sessionKeysFile }
            ) { reader, settings, defaults throws(ConfigurationError) in
                settings.sessionKeysFile = reader.string("PUSH_CONSOLE_SESSION_KEYS_FILE", default: defaults.sessionKeysFile)
            },
            ConfigurationKey(
                "PUSH_CONSOLE_SESSION_SECRETS", "the same keys inline, comma-separated (when there is no file)",
                default: { $0.sessionSecrets.isEmpty ? "none" : "<redacted>" }
            ) { reader, settings, defaults throws(ConfigurationError) in
                settings.sessionSecrets = reader.string("PUSH_CONSOLE_SESSION_SECRETS", default: defaults.sessionSecrets)
            },
            .text(
                "PUSH_CONSOLE_TRUSTED_PROXIES", \.trustedProxies, expected: "comma-separated IP addresses or CIDR ranges (e.g. 10.0.0.0/8)",
                "proxies whose X-Forwarded-For names the client (login budget per address, audit log)", shown: \.description,
                parse: TrustedProxies.init(parsing:)),
            .int("PUSH_CONSOLE_MAX_CONNECTIONS", \.maxConnections, in: 1...100_000, "connections served at once; more wait in the backlog"),
            .seconds(
                "PUSH_CONSOLE_REQUEST_TIMEOUT_S", \.requestTimeout,
                "seconds a request (head and body) may take to arrive from its first byte (slow clients are cut off)"),
        ])

    public static var keys: Set<String> { table.names }

    /// - Throws: ``PushServiceKit/ConfigurationError`` naming the key; `PUSH_CONSOLE_OPERATORS_FILE`
    ///   when it is not set.
    public init(reader: PushConfigurationReader, defaults: ConsoleConfiguration = ConsoleConfiguration()) throws(ConfigurationError) {
        self = try Self.table.read(reader, defaults: defaults)
        if operatorsFile.isEmpty {
            throw ConfigurationError.invalidValue(
                key: "PUSH_CONSOLE_OPERATORS_FILE", value: "",
                problem:
                    "is required: the console has no default password. Make the file with `pushctl console hash-password` (see docs/reports-and-console.md)"
            )
        }
    }

    public static var environmentHelp: String { table.help(defaults: ConsoleConfiguration()) }
}
