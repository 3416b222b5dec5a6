import Logging
import Synchronization

/// A logger whose records a test can read back: for code whose promise is a log line (a warning
/// before a certificate expires). Records every level.
public final class TestLogCapture: Sendable {
    public struct Entry: Sendable {
        public let level: Logger.Level
        public let message: String
        /// Metadata values as strings.
        public let metadata: [String: String]
    }

    private let stored = Mutex<[Entry]>([])

    public init() {}

    public var entries: [Entry] { stored.withLock { $0 } }

    public var logger: Logger {
        var logger = Logger(label: "capture") { _ in Handler(capture: self) }
        logger.logLevel = .trace
        return logger
    }

    func append(_ entry: Entry) { stored.withLock { $0.append(entry) } }

    struct Handler: LogHandler {
        let capture: TestLogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(
            level: Logger.Level, message: Logger.Message, metadata extra: Logger.Metadata?, source: String, file: String, function: String,
            line: UInt
        ) {
            var all = metadata
            if let extra { all.merge(extra) { $1 } }
            capture.append(Entry(level: level, message: "\(message)", metadata: all.mapValues { "\($0)" }))
        }
    }
}
