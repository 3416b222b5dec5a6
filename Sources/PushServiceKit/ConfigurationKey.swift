/// One configuration key, declared once: its name, its `--help` line, how its default is shown, and
/// how it is read (through ``PushConfigurationReader``'s typed accessors, so every error names the key
/// the same way). A ``ConfigurationTable`` of these gives a settings type its key set, its reader and
/// its `--help` text; docs/configuration.md's tables are checked against the same tables by the tests.
public struct ConfigurationKey<Settings>: @unchecked Sendable {
    /// The variable (and config-file key), e.g. `PUSH_SEND_PREFETCH`.
    public let name: String
    /// One line for `--help`: what the value means and its range.
    public let summary: String
    /// The default, as `--help` shows it.
    let defaultText: (Settings) -> String
    /// Reads the key into `settings` (already holding the keys before it); `defaults` are the values of unset keys.
    let read: (PushConfigurationReader, inout Settings, Settings) throws(ConfigurationError) -> Void

    /// A key read by `read` with its default shown by `defaultText`.
    public init(
        _ name: String, _ summary: String, default defaultText: @escaping (Settings) -> String,
        read: @escaping (PushConfigurationReader, inout Settings, Settings) throws(ConfigurationError) -> Void
    ) {
        self.name = name
        self.summary = summary
        self.defaultText = defaultText
        self.read = read
    }

    /// A whole number in `range`.
    public static func int(_ name: String, _ field: WritableKeyPath<Settings, Int>, in range: ClosedRange<Int>, _ summary: String) -> Self {
        Self(name, summary, default: { "\($0[keyPath: field])" }) { reader, settings, defaults throws(ConfigurationError) in
            settings[keyPath: field] = try reader.int(name, default: defaults[keyPath: field], in: range)
        }
    }

    /// A TCP port, 1–65535.
    public static func port(_ name: String, _ field: WritableKeyPath<Settings, Int>, _ summary: String) -> Self {
        Self(name, summary, default: { "\($0[keyPath: field])" }) { reader, settings, defaults throws(ConfigurationError) in
            settings[keyPath: field] = try reader.port(name, default: defaults[keyPath: field])
        }
    }

    /// A number of seconds, more than 0.
    public static func seconds(_ name: String, _ field: WritableKeyPath<Settings, Duration>, _ summary: String) -> Self {
        Self(name, summary, default: { Self.seconds($0[keyPath: field]) }) { reader, settings, defaults throws(ConfigurationError) in
            settings[keyPath: field] = try reader.seconds(name, default: defaults[keyPath: field])
        }
    }

    /// A boolean (`true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`).
    public static func bool(_ name: String, _ field: WritableKeyPath<Settings, Bool>, _ summary: String) -> Self {
        Self(name, summary, default: { "\($0[keyPath: field])" }) { reader, settings, defaults throws(ConfigurationError) in
            settings[keyPath: field] = try reader.bool(name, default: defaults[keyPath: field])
        }
    }

    /// Any non-empty text.
    public static func string(_ name: String, _ field: WritableKeyPath<Settings, String>, _ summary: String) -> Self {
        Self(name, summary, default: { $0[keyPath: field] }) { reader, settings, defaults in
            settings[keyPath: field] = reader.string(name, default: defaults[keyPath: field])
        }
    }

    /// Text that `parse` accepts (`expected` says what a good value looks like, for the message).
    public static func text<Value>(
        _ name: String, _ field: WritableKeyPath<Settings, Value>, expected: String, _ summary: String,
        shown: @escaping (Value) -> String = { "\($0)" }, parse: @escaping (String) -> Value?
    ) -> Self {
        Self(name, summary, default: { shown($0[keyPath: field]) }) { reader, settings, defaults throws(ConfigurationError) in
            settings[keyPath: field] = try reader.value(name, default: defaults[keyPath: field], expected: expected, parse: parse)
        }
    }

    /// Seconds as `--help` shows them: `30`, `0.5`.
    static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        guard attoseconds != 0 else { return "\(seconds)" }
        return "\(Double(seconds) + Double(attoseconds) / 1e18)"
    }
}

/// A settings type's keys, in reading order: its key set (for unknown-key warnings), its reader and
/// its `--help` section, all from one declaration.
public struct ConfigurationTable<Settings>: @unchecked Sendable {
    /// The `--help` section title, e.g. `push-send`.
    public let title: String
    public let keys: [ConfigurationKey<Settings>]

    public init(_ title: String, _ keys: [ConfigurationKey<Settings>]) {
        self.title = title
        self.keys = keys
    }

    /// Every key name.
    public var names: Set<String> { Set(keys.map(\.name)) }

    /// Reads every key in order; unset keys keep `defaults`' values.
    public func read(_ reader: PushConfigurationReader, defaults: Settings) throws(ConfigurationError) -> Settings {
        var settings = defaults
        for key in keys { try key.read(reader, &settings, defaults) }
        return settings
    }

    /// docs/configuration.md's table of these keys: variable, default, meaning (the `--help` summary).
    public func markdown(defaults: Settings) -> String {
        let rows = keys.map { key -> String in
            let shown = key.defaultText(defaults)
            let value = shown.contains(" ") ? shown : "`\(shown)`"
            return "| `\(key.name)` | \(value) | \(key.summary.split(separator: "|", omittingEmptySubsequences: false).joined(separator: "\\|")) |"
        }
        return (["| variable | default | meaning |", "|---|---|---|"] + rows).joined(separator: "\n")
    }

    /// The `--help` section: the title, then one aligned line per key with its default.
    public func help(defaults: Settings) -> String {
        let width = (keys.map(\.name.count).max() ?? 0) + 2
        let lines = keys.map { key in
            let padding = String(repeating: " ", count: max(width - key.name.count, 2))
            return "  \(key.name)\(padding)\(key.summary) (default \(key.defaultText(defaults)))"
        }
        return ([title.isEmpty ? nil : "\(title):"].compactMap { $0 } + lines).joined(separator: "\n")
    }
}
