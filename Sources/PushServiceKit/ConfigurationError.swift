import PushCore

/// A configuration value, config file or apps file that stops a service at start, with a message that
/// names the key, the bad value (never a password) and what is expected:
///
/// - `PUSH_HTTP_PORT: "80a" is not a port number (1–65535)`
/// - `PUSH_LOG_LEVEL (from config/push.json): "loud" is not a log level (trace, debug, info, notice, warning, error, critical)`
/// - `PUSH_CONFIG_FILE: "config/push.json" does not exist`
/// - `PUSH_APPS_FILE: config/apps.json: apps["com.example.game"].apns.key_id: must be 10 characters …`
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem; compare with the static members, e.g. `error.code == .invalidValue`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Sendable, Hashable {
            case invalidValue
            case configFileUnreadable
            case configFileInvalid
            case appsFileUnreadable
            case appsFileInvalid
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// A key's value cannot be parsed or is out of range.
        public static let invalidValue = Code(.invalidValue)
        /// `PUSH_CONFIG_FILE` names a file that does not exist or cannot be read.
        public static let configFileUnreadable = Code(.configFileUnreadable)
        /// `PUSH_CONFIG_FILE` is not a JSON object of keys to strings, numbers or booleans.
        public static let configFileInvalid = Code(.configFileInvalid)
        /// `PUSH_APPS_FILE`, or a credential file it names, does not exist or cannot be read.
        public static let appsFileUnreadable = Code(.appsFileUnreadable)
        /// The apps file breaks a rule (see ``appsFileError``).
        public static let appsFileInvalid = Code(.appsFileInvalid)

        public var description: String {
            switch kind {
            case .invalidValue: "invalidValue"
            case .configFileUnreadable: "configFileUnreadable"
            case .configFileInvalid: "configFileInvalid"
            case .appsFileUnreadable: "appsFileUnreadable"
            case .appsFileInvalid: "appsFileInvalid"
            }
        }
    }

    /// The kind of problem.
    public let code: Code
    /// The configuration key that was wrong, e.g. `PUSH_HTTP_PORT`, `PUSH_CONFIG_FILE`, `PUSH_APPS_FILE`.
    public let key: String
    /// The whole message, starting with the key.
    public let message: String
    /// For ``Code/appsFileInvalid``: the app and field that were wrong.
    public let appsFileError: AppsFileError?

    private init(_ code: Code, key: String, message: String, appsFileError: AppsFileError? = nil) {
        self.code = code
        self.key = key
        self.message = message
        self.appsFileError = appsFileError
    }

    public var description: String {
        message
    }

    /// `KEY: "value" problem`, e.g. `PUSH_HTTP_PORT: "80a" is not a port number (1–65535)`.
    ///
    /// Services that read keys of their own use this for the same style of message.
    /// - Parameters:
    ///   - key: The key, e.g. `PUSH_SEND_BATCH_SIZE`.
    ///   - value: The value as given; pass it redacted when it may hold a secret.
    ///   - problem: What is wrong and what is expected, e.g. `is not a whole number (1–1000)`.
    ///   - source: Where the value came from when not the environment, e.g. the config file's path.
    public static func invalidValue(key: String, value: String, problem: String, source: String? = nil) -> ConfigurationError {
        let origin = source.map { " (from \($0))" } ?? ""
        return ConfigurationError(.invalidValue, key: key, message: "\(key)\(origin): \(quoted(value)) \(problem)")
    }

    static func configFileUnreadable(key: String, path: String, reason: String) -> ConfigurationError {
        ConfigurationError(.configFileUnreadable, key: key, message: "\(key): \(quoted(path)) \(reason)")
    }

    static func configFileInvalid(key: String, path: String, reason: String) -> ConfigurationError {
        ConfigurationError(.configFileInvalid, key: key, message: "\(key): \(quoted(path)) \(reason)")
    }

    static func appsFileUnreadable(key: String, message: String) -> ConfigurationError {
        ConfigurationError(.appsFileUnreadable, key: key, message: "\(key): \(message)")
    }

    static func appsFileInvalid(key: String, error: AppsFileError) -> ConfigurationError {
        ConfigurationError(.appsFileInvalid, key: key, message: "\(key): \(error)", appsFileError: error)
    }

    /// A JSON-style quoted string.
    static func quoted(_ text: String) -> String {
        JSONText.quoted(text)
    }
}
