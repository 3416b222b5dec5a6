import Foundation
import Logging

extension LogRecord {
    /// The line of `PUSH_LOG_FORMAT=text` (the default), human-readable:
    ///
    /// ```
    /// 2026-01-02T03:04:05.678Z info push-send: batch sent apns.status=200 push.request_id=order-4711
    /// ```
    ///
    /// Timestamp (UTC, milliseconds), level, label, message, then the metadata as `key=value` sorted by key.
    /// Values with spaces, quotes, `=` or control characters (and empty values) are JSON-quoted; newlines
    /// in the message are written as `\n`, so one event is always one line.
    var textLine: String {
        let record = self
        var line = record.iso8601Timestamp
        line.append(" ")
        line.append(record.level.rawValue)
        line.append(" ")
        line.append(record.label)
        line.append(": ")
        line.append(Self.singleLine(record.message))
        for (key, value) in record.metadata.sorted(by: { $0.key < $1.key }) {
            line.append(" ")
            line.append(key)
            line.append("=")
            line.append(Self.quotedIfNeeded(Self.text(of: value)))
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
