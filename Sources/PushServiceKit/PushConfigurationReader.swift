import Configuration
import Foundation
import Logging

/// Reads `PUSH_*` keys from the environment and, under it, the optional JSON config file named by
/// `PUSH_CONFIG_FILE`, through swift-configuration's `ConfigReader`.
///
/// - The environment wins over the file. Empty environment values count as unset.
/// - The file is a JSON object whose keys are the variable names and whose values are strings, numbers
///   or booleans: `{"PUSH_AMQP_URL": "amqps://…", "PUSH_HTTP_PORT": 9102}`.
/// - Typed accessors (``string(_:default:)``, ``int(_:default:in:)``, ``port(_:default:)``, ``bool(_:default:)``,
///   ``seconds(_:default:)``, ``url(_:schemes:expected:)``, ``choice(_:default:)``, ``value(_:default:expected:parse:)``)
///   throw a ``ConfigurationError`` naming the key, the bad value and what is expected. Services read
///   keys of their own through the same accessors, so every message looks alike.
/// - ``unknownKeys(known:)`` lists `PUSH_*` keys that are set but that nothing reads (typos); services log
///   them as a warning with ``warnAboutUnknownKeys(known:logger:)``. `PUSH_TEST_*` keys (the test
///   suite's) are never reported.
public struct PushConfigurationReader: Sendable {
    /// The key naming the optional JSON config file.
    public static let configFileKey = "PUSH_CONFIG_FILE"

    /// The swift-configuration reader: the environment first, then the config file.
    public let configReader: ConfigReader
    /// The config file's path as given in `PUSH_CONFIG_FILE`, if any.
    public let configFile: String?
    /// Every key set in the config file, and every `PUSH_`-prefixed environment variable (any case) that is not empty.
    public let setKeys: Set<String>
    /// Keys set in the environment, to tell where a bad value came from.
    private let environmentKeys: Set<String>

    /// Reads `PUSH_CONFIG_FILE` (when `environment` names one) and prepares the reader.
    ///
    /// - Parameter environment: The process environment; tests pass a dictionary.
    /// - Throws: ``ConfigurationError`` when the config file is missing, unreadable or not a JSON object
    ///   of strings, numbers and booleans; the message names the file.
    public static func load(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws(ConfigurationError) -> PushConfigurationReader {
        let pushEnvironment = environment.filter { key, value in
            key.uppercased().hasPrefix("PUSH_") && !value.allSatisfy(\.isWhitespace)
        }
        let environmentProvider = EnvironmentVariablesProvider(
            environmentVariables: pushEnvironment,
            secretsSpecifier: .dynamic { key, _ in Self.mayHoldSecret(key) }
        )
        guard let configFile = pushEnvironment[configFileKey] else {
            return PushConfigurationReader(
                configReader: ConfigReader(provider: environmentProvider),
                configFile: nil,
                setKeys: Set(pushEnvironment.keys),
                environmentKeys: Set(pushEnvironment.keys)
            )
        }
        let fileKeys = try readConfigFileKeys(path: configFile)
        let fileProvider: FileProvider<JSONSnapshot>
        do {
            // FileProvider takes a SystemPackage.FilePath; its ConfigReader-based initialiser converts from
            // a string, so this module needs no direct dependency on swift-system.
            let location = ConfigReader(
                provider: InMemoryProvider(name: "config-file-location", values: ["filePath": .init(.string(configFile), isSecret: false)])
            )
            fileProvider = try await FileProvider<JSONSnapshot>(
                parsingOptions: JSONSnapshot.ParsingOptions(secretsSpecifier: .dynamic { key, _ in Self.mayHoldSecret(key) }),
                config: location
            )
        } catch {
            throw .configFileInvalid(key: configFileKey, path: configFile, reason: "cannot be loaded: \(error)")
        }
        return PushConfigurationReader(
            configReader: ConfigReader(providers: [environmentProvider, fileProvider]),
            configFile: configFile,
            setKeys: Set(pushEnvironment.keys).union(fileKeys),
            environmentKeys: Set(pushEnvironment.keys)
        )
    }

    private init(configReader: ConfigReader, configFile: String?, setKeys: Set<String>, environmentKeys: Set<String>) {
        self.configReader = configReader
        self.configFile = configFile
        self.setKeys = setKeys
        self.environmentKeys = environmentKeys
    }

    /// The top-level keys of the config file, after checking that it is a JSON object of scalars.
    private static func readConfigFileKeys(path: String) throws(ConfigurationError) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .configFileUnreadable(key: configFileKey, path: path, reason: "does not exist")
        }
        guard !isDirectory.boolValue, let data = FileManager.default.contents(atPath: path) else {
            throw .configFileUnreadable(key: configFileKey, path: path, reason: "cannot be read")
        }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw .configFileInvalid(key: configFileKey, path: path, reason: "is not valid JSON: \(error.localizedDescription)")
        }
        guard let object = parsed as? [String: Any] else {
            throw .configFileInvalid(key: configFileKey, path: path, reason: "must hold a JSON object of keys, e.g. {\"PUSH_HTTP_PORT\": 9102}")
        }
        for key in object.keys.sorted() where !(object[key] is String || object[key] is NSNumber) {
            throw .configFileInvalid(key: configFileKey, path: path, reason: "has \(JSONText.quoted(key)), which must be a string, number or boolean")
        }
        return Array(object.keys)
    }

    /// URLs carry passwords (`amqp://user:password@host`); secrets are redacted in swift-configuration's
    /// access logs and in error messages.
    static func mayHoldSecret(_ key: String) -> Bool {
        ["URL", "PASSWORD", "SECRET", "TOKEN", "PROXY"].contains { key.uppercased().contains($0) }
    }
}

// MARK: - Raw values

extension PushConfigurationReader {
    /// The value of `key` as text (numbers and booleans from the config file become their text), or
    /// `nil` when the key is set nowhere.
    public func string(_ key: String) -> String? {
        let configKey = ConfigKey([key])
        if let value = configReader.string(forKey: configKey) {
            return value.allSatisfy(\.isWhitespace) ? nil : value
        }
        if let value = configReader.int(forKey: configKey) {
            return String(value)
        }
        if let value = configReader.double(forKey: configKey) {
            return String(value)
        }
        if let value = configReader.bool(forKey: configKey) {
            return String(value)
        }
        return nil
    }

    /// The value of `key` as text, or `defaultValue` when it is set nowhere.
    public func string(_ key: String, default defaultValue: String) -> String {
        string(key) ?? defaultValue
    }

    /// Where the value of `key` came from, for messages: `nil` for the environment, else the file's path.
    public func source(of key: String) -> String? {
        environmentKeys.contains(key) ? nil : configFile
    }

    /// The error for a bad value of `key`: `KEY: "value" problem`, naming the config file when the value
    /// came from there. Passwords in URLs are masked; values of `*SECRET*`, `*PASSWORD*` and `*TOKEN*` keys
    /// are not shown at all.
    public func invalidValue(_ key: String, _ value: String, _ problem: String) -> ConfigurationError {
        .invalidValue(key: key, value: Self.shownValue(of: key, value), problem: problem, source: source(of: key))
    }

    /// What a message may show of `value`: `scheme://user:***@host…` for URLs with a password,
    /// `<redacted>` for secret keys, the value itself otherwise.
    static func shownValue(of key: String, _ value: String) -> String {
        guard mayHoldSecret(key) else {
            return value
        }
        guard key.uppercased().contains("URL") || key.uppercased().contains("PROXY") else {
            return "<redacted>"
        }
        // Each URL of a value (a broker list has several) runs from its "://" to the next one. The
        // URL parsers take everything before its *last* '@' as the credentials (a password may hold
        // a raw '@' or ','), so the mask runs from the user's ':' to that '@'. Not split on ',' first:
        // a ',' may be part of a password.
        var shown = ""
        var rest = Substring(value)
        while let schemeEnd = rest.range(of: "://") {
            let next = rest[schemeEnd.upperBound...].range(of: "://")?.lowerBound ?? rest.endIndex
            let url = rest[..<next]
            if let at = url[schemeEnd.upperBound...].lastIndex(of: "@"), let colon = url[schemeEnd.upperBound..<at].firstIndex(of: ":") {
                shown += url[...colon] + "***" + url[at...]
            } else {
                shown += url
            }
            rest = rest[next...]
        }
        return shown + rest
    }
}

// MARK: - Typed accessors

extension PushConfigurationReader {
    /// Parses `key` with `parse`, or returns `defaultValue` when the key is set nowhere.
    ///
    /// - Parameter expected: What a good value looks like, for the message: `is not <expected>`.
    public func value<Value>(
        _ key: String,
        default defaultValue: Value,
        expected: String,
        parse: (String) -> Value?
    ) throws(ConfigurationError) -> Value {
        guard let text = string(key) else {
            return defaultValue
        }
        guard let value = parse(text.trimmingCharacters(in: .whitespaces)) else {
            throw invalidValue(key, text, "is not \(expected)")
        }
        return value
    }

    /// A whole number in `range`: `KEY: "abc" is not a whole number (1–1000)`.
    public func int(_ key: String, default defaultValue: Int, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        try value(key, default: defaultValue, expected: "a whole number (\(range.lowerBound)–\(range.upperBound))") { text in
            Int(text).flatMap { range.contains($0) ? $0 : nil }
        }
    }

    /// A TCP port, 1–65535: `PUSH_HTTP_PORT: "80a" is not a port number (1–65535)`.
    public func port(_ key: String, default defaultValue: Int) throws(ConfigurationError) -> Int {
        try value(key, default: defaultValue, expected: "a port number (1–65535)") { text in
            Int(text).flatMap { (1...65535).contains($0) ? $0 : nil }
        }
    }

    /// `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off` (any case).
    public func bool(_ key: String, default defaultValue: Bool) throws(ConfigurationError) -> Bool {
        try value(key, default: defaultValue, expected: "a boolean (true or false)") { text in
            switch text.lowercased() {
            case "true", "1", "yes", "on": true
            case "false", "0", "no", "off": false
            default: nil
            }
        }
    }

    /// A duration given in seconds, fractions allowed, more than 0: `KEY: "soon" is not a number of seconds (more than 0)`.
    public func seconds(_ key: String, default defaultValue: Duration) throws(ConfigurationError) -> Duration {
        try value(key, default: defaultValue, expected: "a number of seconds (more than 0)") { text in
            guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds < 1e9 else {
                return nil
            }
            return .milliseconds(Int64((seconds * 1000).rounded()))
        }
    }

    /// One of an enum's raw values, compared case-insensitively: `KEY: "xml" is not one of text, json`.
    public func choice<Value: RawRepresentable & CaseIterable>(
        _ key: String,
        default defaultValue: Value
    ) throws(ConfigurationError) -> Value where Value.RawValue == String {
        let names = Value.allCases.map(\.rawValue)
        return try value(key, default: defaultValue, expected: "one of \(names.joined(separator: ", "))") { text in
            Value.allCases.first { $0.rawValue.lowercased() == text.lowercased() }
        }
    }

    /// A URL with one of `schemes` and a host, or `nil` when the key is set nowhere.
    ///
    /// - Parameter expected: What a good value looks like, e.g. `an AMQP URL (amqp://user:password@host:port/vhost)`.
    public func url(_ key: String, schemes: Set<String>, expected: String) throws(ConfigurationError) -> URL? {
        guard let text = string(key) else {
            return nil
        }
        guard let url = URL(string: text.trimmingCharacters(in: .whitespaces)),
            let scheme = url.scheme?.lowercased(), schemes.contains(scheme),
            let host = url.host, !host.isEmpty
        else {
            throw invalidValue(key, text, "is not \(expected)")
        }
        return url
    }
}

// MARK: - Unknown keys

extension PushConfigurationReader {
    /// `PUSH_*` keys that are set but not in `known`, sorted; `PUSH_TEST_*` keys are left out.
    public func unknownKeys(known: Set<String>) -> [String] {
        setKeys.filter { !known.contains($0) && !$0.hasPrefix("PUSH_TEST_") }.sorted()
    }

    /// Logs one warning listing ``unknownKeys(known:)`` (with the nearest known key as a hint), if any.
    public func warnAboutUnknownKeys(known: Set<String> = PushConfiguration.keys, logger: Logger) {
        let unknown = unknownKeys(known: known)
        guard !unknown.isEmpty else {
            return
        }
        let described = unknown.map { key in
            Self.nearest(to: key, in: known).map { "\(key) (did you mean \($0)?)" } ?? key
        }
        logger.warning(
            "Unknown configuration keys are ignored: \(described.joined(separator: ", "))",
            metadata: [
                "push.config.unknown_keys": .array(unknown.map { .string($0) }),
                "push.config.file": .string(configFile ?? "none"),
            ]
        )
    }

    /// The known key closest to `key` by edit distance, if it is close enough to be a typo.
    static func nearest(to key: String, in known: Set<String>) -> String? {
        let candidates = known.map { ($0, editDistance(key, $0)) }.filter { $0.1 <= max(2, key.count / 5) }
        return candidates.min { $0.1 != $1.1 ? $0.1 < $1.1 : $0.0 < $1.0 }?.0
    }

    /// Levenshtein distance over characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
