import Foundation
import Logging

extension LogRecord {
    private static let fixedKeys: Set<String> = ["ts", "level", "label", "message"]

    /// The line of `PUSH_LOG_FORMAT=json`: one JSON object, for log shippers:
    ///
    /// ```
    /// {"ts":"2026-01-02T03:04:05.678Z","level":"info","label":"push-send","message":"batch sent","apns.status":"200"}
    /// ```
    ///
    /// `ts` (UTC, milliseconds), `level`, `label` and `message` come first; then the metadata, flattened
    /// into the object under its own keys, sorted. Scalars become strings, metadata arrays JSON arrays and
    /// metadata dictionaries JSON objects. A metadata key that collides with one of the four fixed keys is
    /// written as `metadata.<key>`.
    var jsonLine: String {
        let record = self
        var line = "{\"ts\":\""
        line.append(record.iso8601Timestamp)
        line.append("\",\"level\":\"")
        line.append(record.level.rawValue)
        line.append("\",\"label\":")
        JSONText.appendQuoted(record.label, to: &line)
        line.append(",\"message\":")
        JSONText.appendQuoted(record.message, to: &line)
        for (key, value) in record.metadata.sorted(by: { $0.key < $1.key }) {
            line.append(",")
            JSONText.appendQuoted(Self.fixedKeys.contains(key) ? "metadata.\(key)" : key, to: &line)
            line.append(":")
            Self.append(value, to: &line)
        }
        line.append("}")
        return line
    }

    private static func append(_ value: Logger.Metadata.Value, to line: inout String) {
        switch value {
        case .string(let string):
            JSONText.appendQuoted(string, to: &line)
        case .stringConvertible(let convertible):
            JSONText.appendQuoted(convertible.description, to: &line)
        case .array(let elements):
            line.append("[")
            for (index, element) in elements.enumerated() {
                if index > 0 { line.append(",") }
                append(element, to: &line)
            }
            line.append("]")
        case .dictionary(let dictionary):
            line.append("{")
            for (index, (key, element)) in dictionary.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { line.append(",") }
                JSONText.appendQuoted(key, to: &line)
                line.append(":")
                append(element, to: &line)
            }
            line.append("}")
        }
    }
}
