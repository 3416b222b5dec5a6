public import PushServiceKit

/// push-render's own settings, read with ``init(reader:defaults:)`` from the same environment and
/// config file as ``PushServiceKit/PushConfiguration`` (which holds `PUSH_LOCALIZATION_DIR`). Every key:
///
/// | key | property | default | accepted values |
/// |---|---|---|---|
/// | `PUSH_RENDER_BATCH_SIZE` | ``batchSize`` | `500` | tokens per send batch (1–5000) |
/// | `PUSH_RENDER_CONCURRENCY` | ``concurrency`` | `4` | push requests rendered at once, also the consumer's prefetch (1–64) |
/// | `PUSH_RENDER_ROUND_TOKENS` | ``roundTokens`` | `10000` | tokens per fan-out round: scanned, rendered, published and checkpointed together (100–1,000,000) |
/// | `PUSH_RENDER_DEFAULT_LOCALE` | ``defaultLocale`` | `en` | the last step of every locale fallback chain |
/// | `PUSH_RENDER_PROGRESS_TTL_S` | ``progressTTL`` | `604800` (7 days) | how long a request id is remembered (idempotency) and a fan-out can resume |
///
/// A round is the unit of crash recovery: its batches are published with confirms and only then is
/// the scan position written to Redis, so a restart resumes at the first unpublished round.
public struct RenderConfiguration: Sendable, Hashable {
    public var batchSize: Int
    public var concurrency: Int
    public var roundTokens: Int
    public var defaultLocale: String
    public var progressTTL: Duration
    /// How long one instance may hold a request before another may take it over (renewed every round).
    public var leaseDuration: Duration
    /// Prepended to progress keys (`<prefix>:{<app>}:render:<id>`) and used for registry keys; tests use their own.
    public var keyPrefix: String

    public static let defaultBatchSize = 500
    public static let defaultConcurrency = 4
    public static let defaultRoundTokens = 10_000
    public static let defaultProgressTTL: Duration = .seconds(7 * 24 * 3600)

    public init(
        batchSize: Int = RenderConfiguration.defaultBatchSize,
        concurrency: Int = RenderConfiguration.defaultConcurrency,
        roundTokens: Int = RenderConfiguration.defaultRoundTokens,
        defaultLocale: String = "en",
        progressTTL: Duration = RenderConfiguration.defaultProgressTTL,
        leaseDuration: Duration = .seconds(60),
        keyPrefix: String = "push"
    ) {
        self.batchSize = batchSize
        self.concurrency = concurrency
        self.roundTokens = roundTokens
        self.defaultLocale = defaultLocale
        self.progressTTL = progressTTL
        self.leaseDuration = leaseDuration
        self.keyPrefix = keyPrefix
    }

    /// Every key this type reads.
    public static let keys: Set<String> = [
        "PUSH_RENDER_BATCH_SIZE", "PUSH_RENDER_CONCURRENCY", "PUSH_RENDER_ROUND_TOKENS", "PUSH_RENDER_DEFAULT_LOCALE",
        "PUSH_RENDER_PROGRESS_TTL_S",
    ]

    /// Reads the keys of the table above through `reader`, using `defaults` for unset keys.
    ///
    /// - Throws: ``PushServiceKit/ConfigurationError`` naming the key, e.g.
    ///   `PUSH_RENDER_BATCH_SIZE: "lots" is not a whole number (1–5000)`.
    public init(reader: PushConfigurationReader, defaults: RenderConfiguration = RenderConfiguration()) throws(ConfigurationError) {
        var configuration = defaults
        configuration.batchSize = try reader.int("PUSH_RENDER_BATCH_SIZE", default: defaults.batchSize, in: 1...5000)
        configuration.concurrency = try reader.int("PUSH_RENDER_CONCURRENCY", default: defaults.concurrency, in: 1...64)
        configuration.roundTokens = try reader.int("PUSH_RENDER_ROUND_TOKENS", default: defaults.roundTokens, in: 100...1_000_000)
        configuration.defaultLocale = try reader.value(
            "PUSH_RENDER_DEFAULT_LOCALE", default: defaults.defaultLocale, expected: "a locale such as en or en-US"
        ) { text in
            !text.isEmpty && text.count <= 35 && text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) ? text : nil
        }
        configuration.progressTTL = try reader.seconds("PUSH_RENDER_PROGRESS_TTL_S", default: defaults.progressTTL)
        self = configuration
    }

    /// The `--help` lines for the keys above.
    public static let environmentHelp = """
        push-render:
          PUSH_RENDER_BATCH_SIZE      tokens per send batch (default 500)
          PUSH_RENDER_CONCURRENCY     push requests rendered at once (default 4)
          PUSH_RENDER_ROUND_TOKENS    tokens per fan-out round, the unit of crash recovery (default 10000)
          PUSH_RENDER_DEFAULT_LOCALE  last locale of every fallback chain (default en)
          PUSH_RENDER_PROGRESS_TTL_S  seconds a request id is remembered for idempotency (default 604800)
        """
}
