import PushCore
public import PushServiceKit

/// push-send's own settings. The shared ones (`PUSH_AMQP_URL`, `PUSH_REDIS_URL`, `PUSH_APPS_FILE`,
/// `PUSH_APNS_ENDPOINT`, `PUSH_APNS_CA_FILE`, …) are ``PushServiceKit/PushConfiguration``'s.
///
/// Read with ``init(reader:defaults:)`` from the same environment and config file; every key is in
/// ``table`` (names, ranges, defaults, `--help`).
///
/// - The window: notifications sent to APNs and not yet settled (answer classified, dedupe mark
///   written) are at most ``maxInFlight``; between ``minInFlight`` and it, the window is sized from
///   rate × APNs round trip, and a `kill -9` repeats at most the window's size at that moment.
/// - ``connections``: HTTP/2 connections per app and environment, at most; one opens only when the
///   open ones carry all the streams APNs allows (1,000 each).
///
/// A bad value throws a ``PushServiceKit/ConfigurationError`` naming the key.
public struct SendConfiguration: Sendable, Hashable {
    public var prefetch: Int
    public var maxInFlight: Int
    public var minInFlight: Int
    public var maxAttempts: Int
    public var maxDeferrals: Int
    public var connections: Int
    public var requestTimeout: Duration
    public var drainTimeout: Duration
    public var dedupeTTL: Duration
    public var credentialPause: Duration
    /// The shortest wait before a notification APNs answered with a 5xx goes again (``RetryWait/serverError``).
    public var serverErrorRetry: Duration
    public var rateLimitsEnabled: Bool
    public var queuePrefix: String

    public init(
        prefetch: Int = 40,
        maxInFlight: Int = 10_000,
        minInFlight: Int = 1000,
        maxAttempts: Int = 8,
        maxDeferrals: Int = 100,
        connections: Int? = nil,
        requestTimeout: Duration = .seconds(15),
        drainTimeout: Duration = .seconds(20),
        dedupeTTL: Duration = .seconds(86_400),
        credentialPause: Duration = .seconds(60),
        serverErrorRetry: Duration = RetryPolicy.appleServerErrorWait,
        rateLimitsEnabled: Bool = true,
        queuePrefix: String = "push"
    ) {
        self.prefetch = prefetch
        self.maxInFlight = maxInFlight
        self.minInFlight = min(minInFlight, maxInFlight)
        self.maxAttempts = maxAttempts
        self.maxDeferrals = maxDeferrals
        self.connections = connections ?? Self.connections(forCeiling: maxInFlight)
        self.requestTimeout = requestTimeout
        self.drainTimeout = drainTimeout
        self.dedupeTTL = dedupeTTL
        self.credentialPause = credentialPause
        self.serverErrorRetry = serverErrorRetry
        self.rateLimitsEnabled = rateLimitsEnabled
        self.queuePrefix = queuePrefix
    }

    /// Connections enough to carry `ceiling` streams at APNs' 1,000 a connection (1–64).
    public static func connections(forCeiling ceiling: Int) -> Int {
        min(max(1, (ceiling + 999) / 1000), 64)
    }

    /// Every key, in reading order: the key set, the reader, `--help` and docs/configuration.md's table come from it.
    public static let table = ConfigurationTable<SendConfiguration>(
        "push-send",
        [
            .int("PUSH_SEND_PREFETCH", \.prefetch, in: 1...1000, "send batches in flight at once (1–1000)"),
            .int("PUSH_SEND_MAX_IN_FLIGHT", \.maxInFlight, in: 1...100_000, "ceiling of the in-flight window (sent, not yet settled) (1–100000)"),
            ConfigurationKey(
                "PUSH_SEND_MIN_IN_FLIGHT", "floor of the window, sized from rate x round trip; a kill -9 repeats at most its size (1–ceiling)",
                default: { "\($0.minInFlight)" }
            ) { reader, settings, defaults throws(ConfigurationError) in
                settings.minInFlight = try reader.int(
                    "PUSH_SEND_MIN_IN_FLIGHT", default: min(defaults.minInFlight, settings.maxInFlight), in: 1...settings.maxInFlight)
            },
            .int("PUSH_SEND_MAX_ATTEMPTS", \.maxAttempts, in: 1...100, "tries of a notification that meets 429/500/503/connection loss (1–100)"),
            .int("PUSH_SEND_MAX_DEFERRALS", \.maxDeferrals, in: 1...10_000, "rate-limit or paused-app deferrals before dead-lettering (1–10000)"),
            ConfigurationKey(
                "PUSH_SEND_CONNECTIONS", "HTTP/2 connections per app and environment, at most; opened as streams fill (1–64)",
                default: { _ in "ceiling/1000" }
            ) { reader, settings, defaults throws(ConfigurationError) in
                let byDefault =
                    defaults.maxInFlight == settings.maxInFlight ? defaults.connections : Self.connections(forCeiling: settings.maxInFlight)
                settings.connections = try reader.int("PUSH_SEND_CONNECTIONS", default: byDefault, in: 1...64)
            },
            .seconds("PUSH_SEND_REQUEST_TIMEOUT_S", \.requestTimeout, "seconds a notification may wait for APNs"),
            .seconds("PUSH_SEND_DRAIN_TIMEOUT_S", \.drainTimeout, "seconds SIGTERM lets in-flight batches finish"),
            .seconds("PUSH_SEND_DEDUPE_TTL_S", \.dedupeTTL, "seconds an accepted notification is remembered"),
            .seconds("PUSH_SEND_CREDENTIAL_PAUSE_S", \.credentialPause, "seconds an app pauses after APNs refused its credentials"),
            ConfigurationKey(
                "PUSH_SEND_SERVER_ERROR_RETRY_S",
                "seconds at least before a notification APNs answered with a 5xx (not 503 Shutdown) goes again; Apple asks for 900 (0–900)",
                default: { "\($0.serverErrorRetry.components.seconds)" }
            ) { reader, settings, defaults throws(ConfigurationError) in
                let seconds = try reader.int(
                    "PUSH_SEND_SERVER_ERROR_RETRY_S", default: Int(defaults.serverErrorRetry.components.seconds),
                    in: 0...Int(RetryPolicy.appleServerErrorWait.components.seconds))
                settings.serverErrorRetry = .seconds(seconds)
            },
            .bool("PUSH_SEND_RATE_LIMITS", \.rateLimitsEnabled, "apply the apps file's rate_limits"),
            .text(
                "PUSH_SEND_QUEUE_PREFIX", \.queuePrefix, expected: "a RabbitMQ name prefix (letters, digits, '.', '-', '_')",
                "RabbitMQ name prefix (tests and benchmarks use their own)"
            ) { text in
                PushQueues.isValidPrefix(text) ? text : nil
            },
        ])

    /// Every key this type reads.
    public static var keys: Set<String> { table.names }

    /// Reads the keys of ``table`` through `reader`, using `defaults` for unset keys.
    public init(reader: PushConfigurationReader, defaults: SendConfiguration = SendConfiguration()) throws(ConfigurationError) {
        self = try Self.table.read(reader, defaults: defaults)
    }

    /// The `--help` lines for the keys above.
    public static var environmentHelp: String { table.help(defaults: SendConfiguration()) }
}
