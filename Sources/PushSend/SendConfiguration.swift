public import PushServiceKit

/// push-send's own settings. The shared ones (`PUSH_AMQP_URL`, `PUSH_REDIS_URL`, `PUSH_APPS_FILE`,
/// `PUSH_APNS_ENDPOINT`, `PUSH_APNS_CA_FILE`, …) are ``PushServiceKit/PushConfiguration``'s.
///
/// Read with ``init(reader:defaults:)`` from the same environment and config file. Every key:
///
/// | key | property | default | accepted values |
/// |---|---|---|---|
/// | `PUSH_SEND_PREFETCH` | ``prefetch`` | `40` | send batches in flight at once (1–1000); × batch size = notifications in flight |
/// | `PUSH_SEND_MAX_IN_FLIGHT` | ``maxInFlight`` | `10000` | ceiling of the in-flight window: notifications sent to APNs and not yet settled (answer classified, dedupe mark written) (1–100000) |
/// | `PUSH_SEND_MIN_IN_FLIGHT` | ``minInFlight`` | `1000` | floor of the window, which is sized from rate × APNs round trip between the two; a `kill -9` repeats at most the window's size at that moment (1–100000, at most the ceiling) |
/// | `PUSH_SEND_MAX_ATTEMPTS` | ``maxAttempts`` | `8` | tries of one notification that keeps meeting 429/500/503/connection loss (1–100) |
/// | `PUSH_SEND_MAX_DEFERRALS` | ``maxDeferrals`` | `100` | times one notification may be deferred by rate limits or a paused app before it is dead-lettered (1–10000) |
/// | `PUSH_SEND_CONNECTIONS` | ``connections`` | the ceiling ÷ 1000, rounded up | HTTP/2 connections per app and environment, at most (1–64); one opens only when the open ones carry all the streams APNs allows (1,000 each) |
/// | `PUSH_SEND_REQUEST_TIMEOUT_S` | ``requestTimeout`` | `15` | seconds one notification may wait for APNs' answer |
/// | `PUSH_SEND_DRAIN_TIMEOUT_S` | ``drainTimeout`` | `20` | seconds SIGTERM lets in-flight batches finish before returning them to the queue |
/// | `PUSH_SEND_DEDUPE_TTL_S` | ``dedupeTTL`` | `86400` | seconds a "this notification was accepted" mark is kept in Redis |
/// | `PUSH_SEND_CREDENTIAL_PAUSE_S` | ``credentialPause`` | `60` | seconds an app's sending pauses after APNs refused its credentials |
/// | `PUSH_SEND_RATE_LIMITS` | ``rateLimitsEnabled`` | `true` | whether the apps file's `rate_limits` are applied |
/// | `PUSH_SEND_QUEUE_PREFIX` | ``queuePrefix`` | `push` | the RabbitMQ name prefix (tests and benchmarks use their own) |
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
        self.rateLimitsEnabled = rateLimitsEnabled
        self.queuePrefix = queuePrefix
    }

    /// Connections enough to carry `ceiling` streams at APNs' 1,000 a connection (1–64).
    public static func connections(forCeiling ceiling: Int) -> Int {
        min(max(1, (ceiling + 999) / 1000), 64)
    }

    /// Every key this type reads.
    public static let keys: Set<String> = [
        "PUSH_SEND_PREFETCH", "PUSH_SEND_MAX_IN_FLIGHT", "PUSH_SEND_MIN_IN_FLIGHT", "PUSH_SEND_MAX_ATTEMPTS", "PUSH_SEND_MAX_DEFERRALS", "PUSH_SEND_CONNECTIONS",
        "PUSH_SEND_REQUEST_TIMEOUT_S", "PUSH_SEND_DRAIN_TIMEOUT_S", "PUSH_SEND_DEDUPE_TTL_S",
        "PUSH_SEND_CREDENTIAL_PAUSE_S", "PUSH_SEND_RATE_LIMITS", "PUSH_SEND_QUEUE_PREFIX",
    ]

    /// Reads the keys of the table above through `reader`, using `defaults` for unset keys.
    public init(reader: PushConfigurationReader, defaults: SendConfiguration = SendConfiguration()) throws(ConfigurationError) {
        var configuration = defaults
        configuration.prefetch = try reader.int("PUSH_SEND_PREFETCH", default: defaults.prefetch, in: 1...1000)
        configuration.maxInFlight = try reader.int("PUSH_SEND_MAX_IN_FLIGHT", default: defaults.maxInFlight, in: 1...100_000)
        configuration.minInFlight = try reader.int(
            "PUSH_SEND_MIN_IN_FLIGHT", default: min(defaults.minInFlight, configuration.maxInFlight), in: 1...configuration.maxInFlight)
        configuration.maxAttempts = try reader.int("PUSH_SEND_MAX_ATTEMPTS", default: defaults.maxAttempts, in: 1...100)
        configuration.maxDeferrals = try reader.int("PUSH_SEND_MAX_DEFERRALS", default: defaults.maxDeferrals, in: 1...10_000)
        let connectionsByDefault = defaults.maxInFlight == configuration.maxInFlight ? defaults.connections : Self.connections(forCeiling: configuration.maxInFlight)
        configuration.connections = try reader.int("PUSH_SEND_CONNECTIONS", default: connectionsByDefault, in: 1...64)
        configuration.requestTimeout = try reader.seconds("PUSH_SEND_REQUEST_TIMEOUT_S", default: defaults.requestTimeout)
        configuration.drainTimeout = try reader.seconds("PUSH_SEND_DRAIN_TIMEOUT_S", default: defaults.drainTimeout)
        configuration.dedupeTTL = try reader.seconds("PUSH_SEND_DEDUPE_TTL_S", default: defaults.dedupeTTL)
        configuration.credentialPause = try reader.seconds("PUSH_SEND_CREDENTIAL_PAUSE_S", default: defaults.credentialPause)
        configuration.rateLimitsEnabled = try reader.bool("PUSH_SEND_RATE_LIMITS", default: defaults.rateLimitsEnabled)
        configuration.queuePrefix = try reader.value(
            "PUSH_SEND_QUEUE_PREFIX",
            default: defaults.queuePrefix,
            expected: "a RabbitMQ name prefix (letters, digits, '.', '-', '_')"
        ) { text in
            let allowed = !text.isEmpty && text.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || ".-_".unicodeScalars.contains($0)) }
            return allowed ? text : nil
        }
        self = configuration
    }

    /// The `--help` lines for the keys above.
    public static let environmentHelp = """
        push-send:
          PUSH_SEND_PREFETCH            send batches in flight at once (default 40)
          PUSH_SEND_MAX_IN_FLIGHT       ceiling of the in-flight window (sent, not yet settled) (default 10000)
          PUSH_SEND_MIN_IN_FLIGHT       floor of the window, sized from rate x round trip; a kill -9 repeats at most its size (default 1000)
          PUSH_SEND_MAX_ATTEMPTS        tries of a notification that meets 429/500/503/connection loss (default 8)
          PUSH_SEND_MAX_DEFERRALS       rate-limit or paused-app deferrals before dead-lettering (default 100)
          PUSH_SEND_CONNECTIONS         HTTP/2 connections per app and environment, at most; opened as streams fill (default ceiling/1000)
          PUSH_SEND_REQUEST_TIMEOUT_S   seconds a notification may wait for APNs (default 15)
          PUSH_SEND_DRAIN_TIMEOUT_S     seconds SIGTERM lets in-flight batches finish (default 20)
          PUSH_SEND_DEDUPE_TTL_S        seconds an accepted notification is remembered (default 86400)
          PUSH_SEND_CREDENTIAL_PAUSE_S  seconds an app pauses after APNs refused its credentials (default 60)
          PUSH_SEND_RATE_LIMITS         apply the apps file's rate_limits (default true)
          PUSH_SEND_QUEUE_PREFIX        RabbitMQ name prefix (default push)
        """
}
