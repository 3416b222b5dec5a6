import Foundation
import Logging

/// The log handler of every service: one line per event on standard output, as text
/// (``LogRecord/textLine``) or JSON (``LogRecord/jsonLine``) per `PUSH_LOG_FORMAT`.
public struct PushLogHandler: LogHandler {
    public let format: LogFormat
    public let label: String
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let output: LogOutput
    private let clock: @Sendable () -> Date

    /// - Parameters:
    ///   - format: Text or JSON lines.
    ///   - label: The logger's label.
    ///   - logLevel: The lowest level written.
    ///   - output: Where lines go; tests pass a collecting closure.
    ///   - metadataProvider: Adds metadata to every line, e.g. from task-locals.
    ///   - clock: The time of each line; tests pass a fixed date.
    public init(
        format: LogFormat,
        label: String,
        logLevel: Logger.Level = .info,
        output: LogOutput = .standardOutput,
        metadataProvider: Logger.MetadataProvider? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.format = format
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
        switch format {
        case .text: output.write(record.textLine)
        case .json: output.write(record.jsonLine)
        }
    }
}
