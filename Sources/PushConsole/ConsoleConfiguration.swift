public import PushServiceKit

/// push-console's own settings (the shared ones are ``PushServiceKit/PushConfiguration``'s):
///
/// | key | field | default |
/// |---|---|---|
/// | `PUSH_CONSOLE_OPERATORS_FILE` | ``operatorsFile`` | none: required (the console has no default password) |
/// | `PUSH_CONSOLE_SESSION_TTL_S` | ``sessionTTL`` | `28800` (8 hours) |
/// | `PUSH_CONSOLE_SECURE_COOKIES` | ``secureCookies`` | `false`; `true` behind TLS |
public struct ConsoleConfiguration: Sendable, Hashable {
    /// The operators and API keys (``OperatorCredentials``).
    public var operatorsFile: String
    /// How long a login lasts without use.
    public var sessionTTL: Duration
    /// Marks the session cookie `Secure` (only sent over HTTPS).
    public var secureCookies: Bool

    public init(operatorsFile: String = "", sessionTTL: Duration = .seconds(8 * 3600), secureCookies: Bool = false) {
        self.operatorsFile = operatorsFile
        self.sessionTTL = sessionTTL
        self.secureCookies = secureCookies
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
                    "is required: the console has no default password. Make the file with `pushctl console hash-password` (see the README, \"Console\")"
            )
        }
    }

    public static var environmentHelp: String { table.help(defaults: ConsoleConfiguration()) }
}
