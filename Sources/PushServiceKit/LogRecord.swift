import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One log event with everything a line needs: the handler's metadata, the metadata provider's and the
/// event's own merged (the event's win), and the error as `error.message` / `error.type`.
struct LogRecord {
    var timestamp: Date
    var level: Logger.Level
    var label: String
    var message: String
    var metadata: Logger.Metadata

    init(
        event: LogEvent,
        label: String,
        handlerMetadata: Logger.Metadata,
        metadataProvider: Logger.MetadataProvider?,
        timestamp: Date
    ) {
        var metadata = handlerMetadata
        if let provided = metadataProvider?.get(), !provided.isEmpty {
            metadata.merge(provided) { _, provided in provided }
        }
        if let explicit = event.metadata, !explicit.isEmpty {
            metadata.merge(explicit) { _, explicit in explicit }
        }
        if let error = event.error {
            metadata["error.message"] = "\(error)"
            metadata["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        self.timestamp = timestamp
        self.level = event.level
        self.label = label
        self.message = event.message.description
        self.metadata = metadata
    }

    /// `2026-01-02T03:04:05.678Z`: ISO 8601 in UTC with milliseconds.
    var iso8601Timestamp: String {
        Self.iso8601(timestamp)
    }

    static func iso8601(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let (wholeSeconds, millisecond) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        var seconds = time_t(millisecond < 0 ? wholeSeconds - 1 : wholeSeconds)
        let fraction = millisecond < 0 ? millisecond + 1000 : millisecond
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var text = ""
        text.reserveCapacity(24)
        append(Int(parts.tm_year) + 1900, width: 4, to: &text)
        text.append("-")
        append(Int(parts.tm_mon) + 1, width: 2, to: &text)
        text.append("-")
        append(Int(parts.tm_mday), width: 2, to: &text)
        text.append("T")
        append(Int(parts.tm_hour), width: 2, to: &text)
        text.append(":")
        append(Int(parts.tm_min), width: 2, to: &text)
        text.append(":")
        append(Int(parts.tm_sec), width: 2, to: &text)
        text.append(".")
        append(Int(fraction), width: 3, to: &text)
        text.append("Z")
        return text
    }

    private static func append(_ number: Int, width: Int, to text: inout String) {
        let digits = String(number)
        if digits.count < width {
            text.append(String(repeating: "0", count: width - digits.count))
        }
        text.append(digits)
    }
}
