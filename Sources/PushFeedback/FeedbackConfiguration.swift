public import PushServiceKit

/// push-feedback's own settings: how feedback is batched and how stale tokens are swept.
///
/// Read with ``init(reader:defaults:)`` from the same environment and config file as
/// ``PushServiceKit/PushConfiguration``; every key is in ``table``.
///
/// The sweep compares a token's last registration (`updated_at`) with now − ``staleDays``; apps
/// re-register at every launch, so a token silent for months belongs to a device that is gone. It is
/// off by default because only the operator knows how long their users go without opening the app.
public struct FeedbackConfiguration: Sendable, Hashable {
    /// Feedback events per batch: one Redis pipeline, one batch of confirmed publishes, one `multiple` ack.
    public var batchSize: Int
    /// Batches processed at once; while one waits for Redis, another waits for the broker's confirms.
    public var batchesInFlight: Int
    /// How long a removal note lives (see ``TokenRegistry/TokenRegistry/removeIfNotRegistered(_:now:noteLifetime:)``);
    /// zero leaves none.
    public var removalNoteLifetime: Duration
    /// Days without a registration after which the sweep removes a token; 0 = no sweep.
    public var staleDays: Int
    /// How often each app is swept: from the end of one pass to the start of the next.
    public var sweepInterval: Duration
    /// Tokens the sweep examines per second at most.
    public var sweepRate: Int
    /// Tokens asked of each `SSCAN` step.
    public var sweepBatchSize: Int
    /// The part before `{<app>}` of the sweep's Redis keys; the token registry's prefix.
    public var keyPrefix: String

    public init(
        batchSize: Int = 500,
        batchesInFlight: Int = 4,
        removalNoteLifetime: Duration = .seconds(3600),
        staleDays: Int = 0,
        sweepInterval: Duration = .seconds(86_400),
        sweepRate: Int = 1000,
        sweepBatchSize: Int = 200,
        keyPrefix: String = "push"
    ) {
        self.batchSize = batchSize
        self.batchesInFlight = batchesInFlight
        self.removalNoteLifetime = removalNoteLifetime
        self.staleDays = staleDays
        self.sweepInterval = sweepInterval
        self.sweepRate = sweepRate
        self.sweepBatchSize = sweepBatchSize
        self.keyPrefix = keyPrefix
    }

    /// The broker prefetch: every batch in flight full, at most 65535 (AMQP's limit).
    public var prefetch: UInt16 {
        UInt16(Swift.min(65_535, Swift.max(1, batchSize * batchesInFlight)))
    }

    /// Whether the stale-token sweep runs.
    public var sweepsStaleTokens: Bool { staleDays > 0 }

    /// ``staleDays`` in ms.
    public var staleAge: Int64 { Int64(staleDays) * 86_400_000 }

    /// Every key, in reading order: the key set, the reader, `--help` and docs/configuration.md's table come from it.
    public static let table = ConfigurationTable<FeedbackConfiguration>(
        "push-feedback",
        [
            .int("PUSH_FEEDBACK_BATCH_SIZE", \.batchSize, in: 1...5000, "feedback events per pipelined batch (1–5000)"),
            .int("PUSH_FEEDBACK_BATCHES_IN_FLIGHT", \.batchesInFlight, in: 1...64, "batches processed at once; prefetch = size × batches (1–64)"),
            ConfigurationKey(
                "PUSH_FEEDBACK_REMOVAL_NOTE_S", "seconds a removal is remembered for redelivered events (0–604800; 0 = off)",
                default: { "\($0.removalNoteLifetime.components.seconds)" }
            ) { reader, settings, defaults throws(ConfigurationError) in
                let (noteSeconds, _) = defaults.removalNoteLifetime.components
                settings.removalNoteLifetime = .seconds(try reader.int("PUSH_FEEDBACK_REMOVAL_NOTE_S", default: Int(noteSeconds), in: 0...604_800))
            },
            .int("PUSH_FEEDBACK_STALE_DAYS", \.staleDays, in: 0...3650, "remove tokens not registered again for this many days (0 = no sweep)"),
            .seconds("PUSH_FEEDBACK_SWEEP_INTERVAL_S", \.sweepInterval, "seconds from the end of one sweep of an app to the next"),
            .int("PUSH_FEEDBACK_SWEEP_RATE", \.sweepRate, in: 1...1_000_000, "tokens the sweep examines per second at most, over all apps"),
            .int("PUSH_FEEDBACK_SWEEP_BATCH", \.sweepBatchSize, in: 1...10_000, "SSCAN COUNT of one sweep step (1–10000)"),
        ])

    /// Every key this type reads.
    public static var keys: Set<String> { table.names }

    /// Reads the keys of ``table`` through `reader`, using `defaults` for unset keys.
    ///
    /// - Throws: ``PushServiceKit/ConfigurationError`` naming the key, e.g.
    ///   `PUSH_FEEDBACK_STALE_DAYS: "often" is not a whole number (0–3650)`.
    public init(reader: PushConfigurationReader, defaults: FeedbackConfiguration = FeedbackConfiguration()) throws(ConfigurationError) {
        self = try Self.table.read(reader, defaults: defaults)
    }

    /// The `--help` lines for the keys above.
    public static var environmentHelp: String { table.help(defaults: FeedbackConfiguration()) }
}
