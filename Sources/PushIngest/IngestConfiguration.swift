public import PushServiceKit

/// push-ingest's own settings: rate limits and the bounds on every HTTP request.
///
/// Read with ``init(reader:defaults:)`` from the same environment and config file as
/// ``PushServiceKit/PushConfiguration``. Every key:
///
/// | key | property | default | accepted values |
/// |---|---|---|---|
/// | `PUSH_INGEST_RATE_PER_CLIENT` | ``ratePerClient`` | `20000` | requests per second from one client address (0–10,000,000; 0 turns the limit off) |
/// | `PUSH_INGEST_RATE_PER_APP` | ``ratePerApp`` | `50000` | requests per second for one app (0–10,000,000; 0 turns the limit off) |
/// | `PUSH_INGEST_MAX_BODY_BYTES` | ``maxBodySize`` | `16384` | largest request body (256–1,048,576); larger bodies get `413` |
/// | `PUSH_INGEST_REQUEST_TIMEOUT_S` | ``requestTimeout`` | `5` | seconds one request may take, body upload included (more than 0) |
/// | `PUSH_INGEST_IDLE_TIMEOUT_S` | ``idleTimeout`` | `60` | seconds a keep-alive connection may stay silent before it is closed |
/// | `PUSH_INGEST_MAX_CONNECTIONS` | ``maxConnections`` | `4096` | connections served at once (1–1,000,000); more wait in the backlog |
///
/// The limits are a safety valve against a runaway client or app, not quotas: the defaults are high
/// because behind a load balancer every client shares one address, and because the ingest benchmark
/// (`Benchmarks/ingest`) sends everything from 127.0.0.1. Lower ``ratePerClient`` where clients connect
/// directly. Each limit allows a burst of one second's worth of requests (GCRA, see `RateLimiting`).
///
/// Header limits are fixed (``maxHeaderFieldSize``, ``maxHeaderListSize``, ``maxHeaderFieldCount``):
/// no client of this API needs more, and a request over them is answered `400` and the connection closed
/// by the HTTP parser before any handler runs.
public struct IngestConfiguration: Sendable, Hashable {
    /// Requests per second one client address may make to any endpoint; 0 turns the limit off.
    public var ratePerClient: Int
    /// Requests per second one app may receive (API and legacy forms together); 0 turns the limit off.
    public var ratePerApp: Int
    /// The largest request body accepted; larger bodies get `413` (the CONTRACT's bodies are < 2 KiB).
    public var maxBodySize: Int
    /// How long one request may take from the handler's start, reading the body included; after it the
    /// client gets `503 {"error":"timeout"}`. Redis commands are bounded by their own timeout
    /// (`command_timeout_ms`, 2 s by default), so a Redis outage answers `503 unavailable` sooner.
    public var requestTimeout: Duration
    /// How long a connection may stay without reading anything before it is closed.
    public var idleTimeout: Duration
    /// The most connections served at once; further clients wait in the listen backlog until one closes.
    public var maxConnections: Int
    /// The longest single header line (name and value).
    public var maxHeaderFieldSize: Int
    /// The most header bytes a request may carry in total.
    public var maxHeaderListSize: Int
    /// The most header fields a request may carry.
    public var maxHeaderFieldCount: Int
    /// Prepended to every rate-limit key (`<prefix>:ingest:client:<address>`, `<prefix>:{<bundle id>}:ingest`),
    /// so tests that share a Redis keep their counters apart.
    public var rateLimitKeyPrefix: String

    public static let defaultRatePerClient = 20_000
    public static let defaultRatePerApp = 50_000
    public static let defaultMaxBodySize = 16 * 1024
    public static let defaultRequestTimeout: Duration = .seconds(5)
    public static let defaultIdleTimeout: Duration = .seconds(60)
    public static let defaultMaxConnections = 4096

    public init(
        ratePerClient: Int = IngestConfiguration.defaultRatePerClient,
        ratePerApp: Int = IngestConfiguration.defaultRatePerApp,
        maxBodySize: Int = IngestConfiguration.defaultMaxBodySize,
        requestTimeout: Duration = IngestConfiguration.defaultRequestTimeout,
        idleTimeout: Duration = IngestConfiguration.defaultIdleTimeout,
        maxConnections: Int = IngestConfiguration.defaultMaxConnections,
        maxHeaderFieldSize: Int = 8 * 1024,
        maxHeaderListSize: Int = 32 * 1024,
        maxHeaderFieldCount: Int = 100,
        rateLimitKeyPrefix: String = "push:ratelimit"
    ) {
        self.ratePerClient = ratePerClient
        self.ratePerApp = ratePerApp
        self.maxBodySize = maxBodySize
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
        self.maxHeaderFieldSize = maxHeaderFieldSize
        self.maxHeaderListSize = maxHeaderListSize
        self.maxHeaderFieldCount = maxHeaderFieldCount
        self.rateLimitKeyPrefix = rateLimitKeyPrefix
    }

    /// Every key this type reads.
    public static let keys: Set<String> = [
        "PUSH_INGEST_RATE_PER_CLIENT", "PUSH_INGEST_RATE_PER_APP", "PUSH_INGEST_MAX_BODY_BYTES",
        "PUSH_INGEST_REQUEST_TIMEOUT_S", "PUSH_INGEST_IDLE_TIMEOUT_S", "PUSH_INGEST_MAX_CONNECTIONS",
    ]

    /// Reads the keys of the table above through `reader`, using `defaults` for unset keys.
    ///
    /// - Throws: ``PushServiceKit/ConfigurationError`` naming the key, e.g.
    ///   `PUSH_INGEST_RATE_PER_APP: "lots" is not a whole number (0–10000000)`.
    public init(reader: PushConfigurationReader, defaults: IngestConfiguration = IngestConfiguration()) throws(ConfigurationError) {
        var configuration = defaults
        configuration.ratePerClient = try reader.int("PUSH_INGEST_RATE_PER_CLIENT", default: defaults.ratePerClient, in: 0...10_000_000)
        configuration.ratePerApp = try reader.int("PUSH_INGEST_RATE_PER_APP", default: defaults.ratePerApp, in: 0...10_000_000)
        configuration.maxBodySize = try reader.int("PUSH_INGEST_MAX_BODY_BYTES", default: defaults.maxBodySize, in: 256...1_048_576)
        configuration.requestTimeout = try reader.seconds("PUSH_INGEST_REQUEST_TIMEOUT_S", default: defaults.requestTimeout)
        configuration.idleTimeout = try reader.seconds("PUSH_INGEST_IDLE_TIMEOUT_S", default: defaults.idleTimeout)
        configuration.maxConnections = try reader.int("PUSH_INGEST_MAX_CONNECTIONS", default: defaults.maxConnections, in: 1...1_000_000)
        self = configuration
    }

    /// The `--help` lines for the keys above.
    public static let environmentHelp = """
        push-ingest:
          PUSH_INGEST_RATE_PER_CLIENT   requests/s from one client address (default 20000; 0 = no limit)
          PUSH_INGEST_RATE_PER_APP      requests/s for one app (default 50000; 0 = no limit)
          PUSH_INGEST_MAX_BODY_BYTES    largest request body, larger gets 413 (default 16384)
          PUSH_INGEST_REQUEST_TIMEOUT_S seconds one request may take (default 5)
          PUSH_INGEST_IDLE_TIMEOUT_S    seconds an idle keep-alive connection stays open (default 60)
          PUSH_INGEST_MAX_CONNECTIONS   connections served at once (default 4096)
        """
}
