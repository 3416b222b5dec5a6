public import PushServiceKit

/// push-feedback's own settings: how feedback is batched and how stale tokens are swept.
///
/// Read with ``init(reader:defaults:)`` from the same environment and config file as
/// ``PushServiceKit/PushConfiguration``. Every key:
///
/// | key | property | default | accepted values |
/// |---|---|---|---|
/// | `PUSH_FEEDBACK_BATCH_SIZE` | ``batchSize`` | `500` | events per pipelined batch (1–5000) |
/// | `PUSH_FEEDBACK_BATCHES_IN_FLIGHT` | ``batchesInFlight`` | `4` | batches processed at once (1–64); the broker prefetch is `batch size × batches` (at most 65535) |
/// | `PUSH_FEEDBACK_REMOVAL_NOTE_S` | ``removalNoteLifetime`` | `3600` | seconds a removal is remembered, so a redelivered event still announces it (0–604800; 0 = off) |
/// | `PUSH_FEEDBACK_STALE_DAYS` | ``staleDays`` | `0` (off) | remove tokens not registered again for this many days (0–3650; 0 turns the sweep off) |
/// | `PUSH_FEEDBACK_SWEEP_INTERVAL_S` | ``sweepInterval`` | `86400` | seconds from the end of one sweep of an app to the start of the next (more than 0) |
/// | `PUSH_FEEDBACK_SWEEP_RATE` | ``sweepRate`` | `1000` | tokens examined per second at most, over all apps (1–1,000,000) |
/// | `PUSH_FEEDBACK_SWEEP_BATCH` | ``sweepBatchSize`` | `200` | the `SSCAN` `COUNT` of one sweep step (1–10000) |
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

    /// Every key this type reads.
    public static let keys: Set<String> = [
        "PUSH_FEEDBACK_BATCH_SIZE", "PUSH_FEEDBACK_BATCHES_IN_FLIGHT", "PUSH_FEEDBACK_REMOVAL_NOTE_S", "PUSH_FEEDBACK_STALE_DAYS",
        "PUSH_FEEDBACK_SWEEP_INTERVAL_S", "PUSH_FEEDBACK_SWEEP_RATE", "PUSH_FEEDBACK_SWEEP_BATCH",
    ]

    /// Reads the keys of the table above through `reader`, using `defaults` for unset keys.
    ///
    /// - Throws: ``PushServiceKit/ConfigurationError`` naming the key, e.g.
    ///   `PUSH_FEEDBACK_STALE_DAYS: "often" is not a whole number (0–3650)`.
    public init(reader: PushConfigurationReader, defaults: FeedbackConfiguration = FeedbackConfiguration()) throws(ConfigurationError) {
        var configuration = defaults
        configuration.batchSize = try reader.int("PUSH_FEEDBACK_BATCH_SIZE", default: defaults.batchSize, in: 1...5000)
        configuration.batchesInFlight = try reader.int("PUSH_FEEDBACK_BATCHES_IN_FLIGHT", default: defaults.batchesInFlight, in: 1...64)
        let (noteSeconds, _) = defaults.removalNoteLifetime.components
        configuration.removalNoteLifetime = .seconds(try reader.int("PUSH_FEEDBACK_REMOVAL_NOTE_S", default: Int(noteSeconds), in: 0...604_800))
        configuration.staleDays = try reader.int("PUSH_FEEDBACK_STALE_DAYS", default: defaults.staleDays, in: 0...3650)
        configuration.sweepInterval = try reader.seconds("PUSH_FEEDBACK_SWEEP_INTERVAL_S", default: defaults.sweepInterval)
        configuration.sweepRate = try reader.int("PUSH_FEEDBACK_SWEEP_RATE", default: defaults.sweepRate, in: 1...1_000_000)
        configuration.sweepBatchSize = try reader.int("PUSH_FEEDBACK_SWEEP_BATCH", default: defaults.sweepBatchSize, in: 1...10_000)
        self = configuration
    }

    /// The `--help` lines for the keys above.
    public static let environmentHelp = """
        push-feedback:
          PUSH_FEEDBACK_BATCH_SIZE        feedback events per pipelined batch (default 500)
          PUSH_FEEDBACK_BATCHES_IN_FLIGHT batches processed at once (default 4; prefetch = size × batches)
          PUSH_FEEDBACK_REMOVAL_NOTE_S    seconds a removal is remembered for redelivered events (default 3600; 0 = off)
          PUSH_FEEDBACK_STALE_DAYS        remove tokens not registered again for this many days (default 0 = no sweep)
          PUSH_FEEDBACK_SWEEP_INTERVAL_S  seconds from the end of one sweep of an app to the next (default 86400)
          PUSH_FEEDBACK_SWEEP_RATE        tokens the sweep examines per second at most (default 1000)
          PUSH_FEEDBACK_SWEEP_BATCH       SSCAN COUNT of one sweep step (default 200)
        """
}
