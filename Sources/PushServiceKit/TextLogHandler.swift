import Foundation
import Logging

/// Human-readable log lines (`PUSH_LOG_FORMAT=text`, the default):
///
/// ```
/// 2026-01-02T03:04:05.678Z info push-send: batch sent apns.status=200 push.request_id=order-4711
/// ```
///
/// Timestamp (UTC, milliseconds), level, label, message, then the metadata as `key=value` sorted by key.
/// Values with spaces, quotes, `=` or control characters (and empty values) are JSON-quoted; newlines
/// in the message are written as `\n`, so one event is always one line.
public struct TextLogHandler: LogHandler {
    public let label: String
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let output: LogOutput
    private let clock: @Sendable () -> Date

    /// - Parameters:
    ///   - label: The logger's label.
    ///   - logLevel: The lowest level written.
    ///   - output: Where lines go; tests pass a collecting closure.
    ///   - metadataProvider: Adds metadata to every line, e.g. from task-locals.
    ///   - clock: The time of each line; tests pass a fixed date.
    public init(
        label: String,
        logLevel: Logger.Level = .info,
        output: LogOutput = .standardOutput,
        metadataProvider: Logger.MetadataProvider? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.label = label
        self.logLevel = logLevel
        self.output = output
        self.metadataProvider = metadataProvider
        self.clock = clock
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let record = LogRecord(
            event: event,
            label: label,
            handlerMetadata: metadata,
            metadataProvider: metadataProvider,
            timestamp: clock()
        )
        output.write(Self.line(for: record))
    }

    static func line(for record: LogRecord) -> String {
        var line = record.iso8601Timestamp
        line.append(" ")
        line.append(record.level.rawValue)
        line.append(" ")
        line.append(record.label)
        line.append(": ")
        line.append(singleLine(record.message))
        for (key, value) in record.metadata.sorted(by: { $0.key < $1.key }) {
            line.append(" ")
            line.append(key)
            line.append("=")
            line.append(quotedIfNeeded(text(of: value)))
        }
        return line
    }

    /// A metadata value as text: strings as they are, arrays as `[a, b]`, dictionaries as `[k: v]`
    /// (sorted by key).
    private static func text(of value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let string):
            string
        case .stringConvertible(let convertible):
            convertible.description
        case .array(let elements):
            "[" + elements.map(text(of:)).joined(separator: ", ") + "]"
        case .dictionary(let dictionary):
            "[" + dictionary.sorted { $0.key < $1.key }.map { "\($0.key): \(text(of: $0.value))" }.joined(separator: ", ") + "]"
        }
    }

    private static func quotedIfNeeded(_ text: String) -> String {
        let needsQuotes =
            text.isEmpty
            || text.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0.value < 0x20 || $0.value == 0x7F }
        return needsQuotes ? JSONText.quoted(text) : text
    }

    private static func singleLine(_ message: String) -> String {
        guard message.contains(where: \.isNewline) else {
            return message
        }
        return message.replacingOccurrences(of: "\r\n", with: "\\n")
            .replacingOccurrences(of: "\n", with: "\\n")
            .replacingOccurrences(of: "\r", with: "\\r")
    }
}
