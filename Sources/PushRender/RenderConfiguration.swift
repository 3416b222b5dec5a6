public import PushServiceKit

/// push-render's own settings, read with ``init(reader:defaults:)`` from the same environment and
/// config file as ``PushServiceKit/PushConfiguration`` (which holds `PUSH_LOCALIZATION_DIR`); every
/// key is in ``table``.
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
    /// The shards of an app's new registry (`PUSH_REGISTRY_SHARDS`, shared by every service; the
    /// builder sets it from `ServiceDependencies`).
    public var registryShards: Int = 24

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

    /// Every key, in reading order: the key set, the reader, `--help` and docs/configuration.md's table come from it.
    public static let table = ConfigurationTable<RenderConfiguration>(
        "push-render",
        [
            .int("PUSH_RENDER_BATCH_SIZE", \.batchSize, in: 1...5000, "tokens per send batch (1–5000)"),
            .int("PUSH_RENDER_CONCURRENCY", \.concurrency, in: 1...64, "push requests rendered at once, also the consumer's prefetch (1–64)"),
            .int(
                "PUSH_RENDER_ROUND_TOKENS", \.roundTokens, in: 100...1_000_000, "tokens per fan-out round, the unit of crash recovery (100–1000000)"),
            .text(
                "PUSH_RENDER_DEFAULT_LOCALE", \.defaultLocale, expected: "a locale such as en or en-US", "last locale of every fallback chain"
            ) { text in
                !text.isEmpty && text.count <= 35 && text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
                    ? text : nil
            },
            .seconds("PUSH_RENDER_PROGRESS_TTL_S", \.progressTTL, "seconds a request id is remembered for idempotency and a fan-out can resume"),
        ])

    /// Every key this type reads.
    public static var keys: Set<String> { table.names }

    /// Reads the keys of ``table`` through `reader`, using `defaults` for unset keys.
    ///
    /// - Throws: ``PushServiceKit/ConfigurationError`` naming the key, e.g.
    ///   `PUSH_RENDER_BATCH_SIZE: "lots" is not a whole number (1–5000)`.
    public init(reader: PushConfigurationReader, defaults: RenderConfiguration = RenderConfiguration()) throws(ConfigurationError) {
        self = try Self.table.read(reader, defaults: defaults)
    }

    /// The `--help` lines for the keys above.
    public static var environmentHelp: String { table.help(defaults: RenderConfiguration()) }
}
