import Logging
import Synchronization

/// Sets up swift-log for a service: ``PushLogHandler`` (text or JSON lines) on standard output.
public enum PushLogging {
    private static let isBootstrapped = Mutex(false)

    /// Installs the handlers for `format` at `level`, once per process.
    ///
    /// `metadataProvider` adds metadata to every line (e.g. a request id from a task-local).
    ///
    /// swift-log allows one bootstrap per process; later calls change nothing and return `false`.
    /// Loggers created before the first call keep swift-log's default handler, so call this first.
    @discardableResult
    public static func bootstrap(
        format: LogFormat,
        level: Logger.Level,
        output: LogOutput = .standardOutput,
        metadataProvider: Logger.MetadataProvider? = nil
    ) -> Bool {
        let isFirst = isBootstrapped.withLock { isBootstrapped in
            defer { isBootstrapped = true }
            return !isBootstrapped
        }
        guard isFirst else {
            return false
        }
        LoggingSystem.bootstrap(
            { label, metadataProvider in
                makeHandler(label: label, format: format, level: level, output: output, metadataProvider: metadataProvider)
            },
            metadataProvider: metadataProvider
        )
        return true
    }

    /// Installs the handlers ``PushConfiguration/logFormat`` and ``PushConfiguration/logLevel`` name.
    @discardableResult
    public static func bootstrap(_ configuration: PushConfiguration) -> Bool {
        bootstrap(format: configuration.logFormat, level: configuration.logLevel)
    }

    /// The handler for `format`, for a logger labelled `label`.
    public static func makeHandler(
        label: String,
        format: LogFormat,
        level: Logger.Level,
        output: LogOutput = .standardOutput,
        metadataProvider: Logger.MetadataProvider? = nil
    ) -> any LogHandler {
        PushLogHandler(format: format, label: label, logLevel: level, output: output, metadataProvider: metadataProvider)
    }
}
