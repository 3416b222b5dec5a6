public import PushServiceKit

/// push-ingest's own settings: rate limits and the bounds on every HTTP request.
///
/// Read with ``init(reader:defaults:)`` from the same environment and config file as
/// ``PushServiceKit/PushConfiguration``; every key is in ``table``.
///
/// The limits are a safety valve against a runaway client or app, not quotas: the defaults are high
/// because behind a load balancer every client shares one address unless the balancer is listed in
/// ``trustedProxies`` (then its `X-Forwarded-For` names the client), and because the ingest benchmark
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
    /// New tokens (registrations of a token the registry does not hold) one client address may add
    /// a minute; 0 turns the budget off. Each app has its own budget too (`ingest.new_tokens_per_minute`).
    public var newTokensPerClientPerMinute: Int = IngestConfiguration.defaultNewTokensPerClientPerMinute
    /// The largest request body accepted; larger bodies get `413` (the CONTRACT's bodies are < 2 KiB).
    public var maxBodySize: Int
    /// How long one request may take from the handler's start, reading the body included; after it the
    /// client gets `408 {"error":"request_timeout"}` when its body had not all arrived (its doing),
    /// else `503 {"error":"timeout"}`. Redis commands are bounded by their own timeout
    /// (`command_timeout_ms`, 2 s by default), so a Redis outage answers `503 unavailable` sooner.
    public var requestTimeout: Duration
    /// How long a connection may stay without reading anything before it is closed.
    public var idleTimeout: Duration
    /// How long a request's head may take from its first byte to its last header line: a client
    /// that sends it a byte at a time is cut off, so slow sockets cannot hold every connection slot.
    public var headerTimeout: Duration = IngestConfiguration.defaultHeaderTimeout
    /// The most connections served at once; further clients wait in the listen backlog until one closes.
    public var maxConnections: Int
    /// Peers whose `X-Forwarded-For` names the client for the per-client limit (load balancers,
    /// reverse proxies; addresses or CIDR ranges); empty: the header is ignored and the TCP peer is the client.
    public var trustedProxies: TrustedProxies = .none
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
    public static let defaultNewTokensPerClientPerMinute = 1_200
    public static let defaultMaxBodySize = 16 * 1024
    public static let defaultRequestTimeout: Duration = .seconds(5)
    public static let defaultIdleTimeout: Duration = .seconds(60)
    public static let defaultHeaderTimeout: Duration = .seconds(10)
    public static let defaultMaxConnections = 4096

    public init(
        ratePerClient: Int = IngestConfiguration.defaultRatePerClient,
        ratePerApp: Int = IngestConfiguration.defaultRatePerApp,
        newTokensPerClientPerMinute: Int = IngestConfiguration.defaultNewTokensPerClientPerMinute,
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
        self.newTokensPerClientPerMinute = newTokensPerClientPerMinute
        self.maxBodySize = maxBodySize
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
        self.maxHeaderFieldSize = maxHeaderFieldSize
        self.maxHeaderListSize = maxHeaderListSize
        self.maxHeaderFieldCount = maxHeaderFieldCount
        self.rateLimitKeyPrefix = rateLimitKeyPrefix
    }

    /// Every key, in reading order: the key set, the reader, `--help` and docs/configuration.md's table come from it.
    public static let table = ConfigurationTable<IngestConfiguration>(
        "push-ingest",
        [
            .int("PUSH_INGEST_RATE_PER_CLIENT", \.ratePerClient, in: 0...10_000_000, "requests/s from one client address (0 = no limit)"),
            .int(
                "PUSH_INGEST_RATE_PER_APP", \.ratePerApp, in: 0...10_000_000, "requests/s for one app, API and legacy forms together (0 = no limit)"),
            .int(
                "PUSH_INGEST_NEW_TOKENS_PER_CLIENT_PER_MINUTE", \.newTokensPerClientPerMinute, in: 0...10_000_000,
                "tokens the registry does not hold yet that one client address may add a minute (0 = no budget)"),
            .int("PUSH_INGEST_MAX_BODY_BYTES", \.maxBodySize, in: 256...1_048_576, "largest request body, larger gets 413 (256–1048576)"),
            .seconds("PUSH_INGEST_REQUEST_TIMEOUT_S", \.requestTimeout, "seconds one request may take, body upload included"),
            .seconds("PUSH_INGEST_IDLE_TIMEOUT_S", \.idleTimeout, "seconds an idle keep-alive connection stays open"),
            .seconds(
                "PUSH_INGEST_HEADER_TIMEOUT_S", \.headerTimeout, "seconds a request's head may take from its first byte (slow clients are cut off)"),
            .int("PUSH_INGEST_MAX_CONNECTIONS", \.maxConnections, in: 1...1_000_000, "connections served at once; more wait in the backlog"),
            .text(
                "PUSH_INGEST_TRUSTED_PROXIES", \.trustedProxies,
                expected: "comma-separated IP addresses or CIDR ranges (e.g. 10.0.0.5,10.1.0.0/16,fd00::/8)",
                "addresses or CIDR ranges of proxies whose X-Forwarded-For names the client for the per-client limit",
                shown: \.description, parse: TrustedProxies.init(parsing:)
            ),
        ])

    /// Every key this type reads.
    public static var keys: Set<String> { table.names }

    /// Reads the keys of ``table`` through `reader`, using `defaults` for unset keys.
    ///
    /// - Throws: ``PushServiceKit/ConfigurationError`` naming the key, e.g.
    ///   `PUSH_INGEST_RATE_PER_APP: "lots" is not a whole number (0–10000000)`.
    public init(reader: PushConfigurationReader, defaults: IngestConfiguration = IngestConfiguration()) throws(ConfigurationError) {
        self = try Self.table.read(reader, defaults: defaults)
    }

    /// The `--help` lines for the keys above.
    public static var environmentHelp: String { table.help(defaults: IngestConfiguration()) }
}
