import AMQP
import Foundation
import Logging
import Redis

/// What every service reads at start (CONTRACT.md, "Environment"), with its defaults.
///
/// Read with ``load(environment:defaults:)``, or ``init(reader:defaults:)`` when the service reads keys
/// of its own through the same ``PushConfigurationReader``. Values come from environment variables,
/// then from the JSON file named by `PUSH_CONFIG_FILE` (same key names; the environment wins), then
/// from `defaults`. Every key:
///
/// | key | property | default | accepted values |
/// |---|---|---|---|
/// | `PUSH_AMQP_URL` | ``amqpURL`` | `amqp://guest:guest@127.0.0.1:5672/%2f` | `amqp://` or `amqps://` URL with a host; a cluster's brokers separated by commas (`amqp://u:p@rabbit-0/%2f,rabbit-1,rabbit-2:5673`, see `AMQPConfiguration`) |
/// | `PUSH_AMQP_QUORUM_SIZE` | ``amqpQuorumSize`` | none: every node of the cluster when the queue is created | 1–99: replicas of each quorum queue the services create (queues that exist keep theirs) |
/// | `PUSH_REDIS_URL` | ``redisURL`` | `redis://127.0.0.1:6379/0` | `redis://` URL with a host, optional `/<db>`; a Redis Cluster as `redis+cluster://host:port,host:port,…` (see `RedisConfiguration`) |
/// | `PUSH_REGISTRY_SHARDS` | ``registryShards`` | `24` | 1–1024: virtual shards of an app's new registry (an existing registry keeps its layout until `pushctl registry migrate`) |
/// | `PUSH_APPS_FILE` | ``appsFile`` | `config/apps.json` | a path (read by ``loadAppsFile(requireCredentialFiles:)``) |
/// | `PUSH_APNS_ENDPOINT` | ``apnsEndpoint`` | none: per app, production or sandbox | `https://host[:port]`, no path |
/// | `PUSH_APNS_CA_FILE` | ``apnsCAFile`` | none: the system trust store | a PEM path |
/// | `PUSH_APNS_PROXY` | ``apnsProxy`` | none: APNs directly | `http://[user:password@]host:port` |
/// | `PUSH_LOCALIZATION_DIR` | ``localizationDir`` | `localization` | a directory path |
/// | `PUSH_HTTP_PORT` | ``httpPort`` | per service (``DefaultHTTPPort``) | 1–65535 |
/// | `PUSH_HTTP_HOST` | ``httpHost`` | `0.0.0.0` (containers) | a host name or IP address |
/// | `PUSH_LOG_LEVEL` | ``logLevel`` | `info` | trace, debug, info, notice, warning, error, critical |
/// | `PUSH_LOG_FORMAT` | ``logFormat`` | `text` | text, json |
/// | `PUSH_SHUTDOWN_TIMEOUT_S` | ``shutdownTimeout`` | `30` | seconds (> 0) SIGTERM may take before in-flight work is cancelled |
/// | `PUSH_REPORT_TTL_S` | ``reportTTL`` | `604800` | seconds (> 0) a request's delivery report is kept after its last change |
/// | `PUSH_CONFIG_FILE` | (``PushConfigurationReader/configFile``) | none | a JSON file of the keys above |
///
/// A bad value throws a ``ConfigurationError`` naming the key, e.g.
/// `PUSH_HTTP_PORT: "80a" is not a port number (1–65535)`. Unknown `PUSH_*` keys are not errors; log
/// them with ``PushConfigurationReader/warnAboutUnknownKeys(known:logger:)``.
public struct PushConfiguration: Sendable, Hashable {
    /// RabbitMQ (`amqps://` for TLS): one URL, or a cluster's brokers separated by commas; checked
    /// when read (it makes an `AMQPConfiguration`).
    public var amqpURL: String
    /// Replicas of each quorum queue a service creates (`x-quorum-initial-group-size`); nil leaves
    /// RabbitMQ's default, every node of the cluster at that moment.
    public var amqpQuorumSize: Int?
    /// Redis.
    public var redisURL: String
    /// The virtual shards an app's registry gets when it is created (`TokenRegistry`'s
    /// `RegistryLayouts`); 1 is the single-tag layout of earlier versions.
    public var registryShards: Int = 24
    /// The apps file: per-app APNs credentials, ingest keys and limits.
    public var appsFile: String
    /// Overrides every app's APNs endpoint, e.g. `https://127.0.0.1:2197` for `apns-sandbox`.
    public var apnsEndpoint: URL?
    /// Extra CA certificates (PEM) to trust for APNs, e.g. `apns-sandbox`'s.
    public var apnsCAFile: String?
    /// The forward proxy push-send reaches APNs through (HTTP `CONNECT`): `http://[user:password@]host:port`.
    public var apnsProxy: String?
    /// The `<locale>.strings` catalogs for server-side localisation.
    public var localizationDir: String
    /// The service's HTTP listener: `/healthz`, `/readyz`, `/metrics` (and push-ingest's API).
    public var httpPort: Int
    /// The address the listener binds to.
    public var httpHost: String
    /// Where `/healthz`, `/readyz` and `/metrics` listen when not on ``httpPort``: push-ingest then
    /// serves only its API on ``httpPort`` (nil: the admin routes are on ``httpPort``).
    public var adminPort: Int?
    /// The port of the admin listener.
    public var effectiveAdminPort: Int { adminPort ?? httpPort }
    /// The lowest level logged.
    public var logLevel: Logger.Level
    /// Text or one JSON object per line.
    public var logFormat: LogFormat
    /// How long graceful shutdown (draining in-flight work) may take before the work is cancelled.
    public var shutdownTimeout: Duration
    /// How long a request's delivery report is kept after its last change (``RequestReports``).
    public var reportTTL: Duration = RequestReports.defaultTTL

    /// The defaults, with the service's own port: `PushConfiguration(httpPort: DefaultHTTPPort.send)`.
    public init(
        httpPort: Int,
        amqpURL: String = PushConfiguration.defaultAMQPURL,
        redisURL: String = PushConfiguration.defaultRedisURL,
        appsFile: String = "config/apps.json",
        apnsEndpoint: URL? = nil,
        apnsCAFile: String? = nil,
        localizationDir: String = "localization",
        httpHost: String = "0.0.0.0",
        logLevel: Logger.Level = .info,
        logFormat: LogFormat = .text,
        shutdownTimeout: Duration = .seconds(30)
    ) {
        self.amqpURL = amqpURL
        self.redisURL = redisURL
        self.appsFile = appsFile
        self.apnsEndpoint = apnsEndpoint
        self.apnsCAFile = apnsCAFile
        self.localizationDir = localizationDir
        self.httpPort = httpPort
        self.httpHost = httpHost
        self.logLevel = logLevel
        self.logFormat = logFormat
        self.shutdownTimeout = shutdownTimeout
    }

    /// `amqp://guest:guest@127.0.0.1:5672/%2f`
    public static let defaultAMQPURL = "amqp://guest:guest@127.0.0.1:5672/%2f"
    /// `redis://127.0.0.1:6379/0`
    public static let defaultRedisURL = "redis://127.0.0.1:6379/0"

    /// The default `PUSH_HTTP_PORT` of each service.
    public enum DefaultHTTPPort {
        /// push-ingest's API and admin listener.
        public static let ingest = 8080
        /// push-render's admin listener.
        public static let render = 9101
        /// push-send's admin listener.
        public static let send = 9102
        /// push-feedback's admin listener.
        public static let feedback = 9103
    }

    /// Every key this type reads, plus `PUSH_CONFIG_FILE`.
    public static var keys: Set<String> { table.names.union([PushConfigurationReader.configFileKey]) }
}

// MARK: - Loading

extension PushConfiguration {
    /// Reads the environment and the optional config file.
    ///
    /// - Parameters:
    ///   - environment: The process environment; tests pass a dictionary.
    ///   - defaults: The values of unset keys, e.g. `PushConfiguration(httpPort: DefaultHTTPPort.render)`.
    /// - Throws: ``ConfigurationError`` naming the key (or the config file) that is wrong.
    public static func load(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        defaults: PushConfiguration
    ) async throws(ConfigurationError) -> PushConfiguration {
        let reader = try await PushConfigurationReader.load(environment: environment)
        return try PushConfiguration(reader: reader, defaults: defaults)
    }

    /// Reads every key of ``table`` through `reader`, using `defaults` for unset keys.
    public init(reader: PushConfigurationReader, defaults: PushConfiguration) throws(ConfigurationError) {
        self = try Self.table.read(reader, defaults: defaults)
    }

    /// `PUSH_AMQP_URL`: one URL, or a cluster's brokers separated by commas, checked by making an
    /// `AMQPConfiguration` of it.
    private static let amqpURLKey = ConfigurationKey<PushConfiguration>(
        "PUSH_AMQP_URL", "RabbitMQ URL (amqps:// for TLS); a cluster's brokers separated by commas", default: { $0.amqpURL }
    ) { reader, settings, defaults throws(ConfigurationError) in
        guard let text = reader.string("PUSH_AMQP_URL") else {
            settings.amqpURL = defaults.amqpURL
            return
        }
        do throws(AMQPError) {
            _ = try AMQPConfiguration(url: text, connectionName: "configuration check")
        } catch {
            throw reader.invalidValue(
                "PUSH_AMQP_URL", text,
                "is not an AMQP URL (amqp://user:password@host:port/vhost, or amqps:// for TLS; a cluster's brokers separated by commas): \(error.message)"
            )
        }
        settings.amqpURL = text
    }

    /// `PUSH_AMQP_QUORUM_SIZE`: unset leaves RabbitMQ's default.
    private static let amqpQuorumSizeKey = ConfigurationKey<PushConfiguration>(
        "PUSH_AMQP_QUORUM_SIZE", "replicas of each quorum queue created (x-quorum-initial-group-size)",
        default: { (settings: PushConfiguration) -> String in
            guard let size = settings.amqpQuorumSize else { return "every node of the cluster when a queue is created" }
            return String(size)
        }
    ) { reader, settings, defaults throws(ConfigurationError) in
        guard reader.string("PUSH_AMQP_QUORUM_SIZE") != nil else {
            settings.amqpQuorumSize = defaults.amqpQuorumSize
            return
        }
        settings.amqpQuorumSize = try reader.int("PUSH_AMQP_QUORUM_SIZE", default: 0, in: 1...99)
    }

    /// `PUSH_REDIS_URL`: checked by making a `RedisConfiguration` of it.
    private static let redisURLKey = ConfigurationKey<PushConfiguration>(
        "PUSH_REDIS_URL", "Redis URL; a Redis Cluster as redis+cluster://host:port,host:port,…", default: { $0.redisURL }
    ) { reader, settings, defaults throws(ConfigurationError) in
        guard let text = reader.string("PUSH_REDIS_URL") else {
            settings.redisURL = defaults.redisURL
            return
        }
        do throws(RedisError) {
            _ = try RedisConfiguration(url: text, source: "PUSH_REDIS_URL")
        } catch {
            throw reader.invalidValue(
                "PUSH_REDIS_URL", text,
                "is not a Redis URL (redis://[:password@]host:port/db, or redis+cluster://host:port,host:port,… for a Redis Cluster): \(error.message)"
            )
        }
        settings.redisURL = text
    }

    /// Every key, in reading order: the key set, the reader, `--help` and docs/configuration.md's table come from it.
    public static let table = ConfigurationTable<PushConfiguration>(
        "Configuration (environment variables; PUSH_CONFIG_FILE names an optional JSON file of the same keys, which the environment overrides)",
        [
            amqpURLKey,
            amqpQuorumSizeKey,
            redisURLKey,
            .int(
                "PUSH_REGISTRY_SHARDS", \.registryShards, in: 1...1024,
                "virtual shards of an app's new registry (1-1024; an existing registry keeps its layout until pushctl registry migrate)"),
            .string("PUSH_APPS_FILE", \.appsFile, "per-app APNs credentials, ingest keys and limits"),
            ConfigurationKey(
                "PUSH_APNS_ENDPOINT", "APNs override, e.g. https://127.0.0.1:2197 for apns-sandbox",
                default: { $0.apnsEndpoint?.absoluteString ?? "per app: production or sandbox" }
            ) { reader, settings, defaults throws(ConfigurationError) in
                let url = try reader.url(
                    "PUSH_APNS_ENDPOINT", schemes: ["https"], expected: "an https URL with a host and optional port (e.g. https://127.0.0.1:2197)"
                )
                if let url, let text = reader.string("PUSH_APNS_ENDPOINT") {
                    let pathIsEmpty = url.path.isEmpty || url.path == "/"
                    if !pathIsEmpty || url.query != nil || url.fragment != nil || url.user != nil {
                        throw reader.invalidValue(
                            "PUSH_APNS_ENDPOINT", text,
                            "is not an https URL with a host and optional port only (e.g. https://127.0.0.1:2197, no path)"
                        )
                    }
                    if let port = url.port, !(1...65535).contains(port) {
                        throw reader.invalidValue("PUSH_APNS_ENDPOINT", text, "has a port outside 1–65535")
                    }
                }
                settings.apnsEndpoint = url ?? defaults.apnsEndpoint
            },
            ConfigurationKey(
                "PUSH_APNS_CA_FILE", "extra CA certificates (PEM) to trust, e.g. apns-sandbox's",
                default: { $0.apnsCAFile ?? "none: the system trust store" }
            ) { reader, settings, defaults in
                settings.apnsCAFile = reader.string("PUSH_APNS_CA_FILE") ?? defaults.apnsCAFile
            },
            ConfigurationKey(
                "PUSH_APNS_PROXY", "HTTP CONNECT proxy to reach APNs through, http://[user:password@]host:port (TLS stays end to end)",
                default: { $0.apnsProxy == nil ? "none: APNs directly" : "<set>" }
            ) { reader, settings, defaults throws(ConfigurationError) in
                guard let text = reader.string("PUSH_APNS_PROXY") else {
                    settings.apnsProxy = defaults.apnsProxy
                    return
                }
                guard text.lowercased().hasPrefix("http://") else {
                    throw reader.invalidValue("PUSH_APNS_PROXY", text, "is not an http:// proxy URL (http://[user:password@]host:port)")
                }
                settings.apnsProxy = text
            },
            .string("PUSH_LOCALIZATION_DIR", \.localizationDir, "LOCALE.strings catalogs for server-side localisation"),
            ConfigurationKey(
                "PUSH_HTTP_PORT", "admin listener port (/healthz, /readyz, /metrics; push-ingest's API too)",
                default: { _ in
                    "ingest \(DefaultHTTPPort.ingest), render \(DefaultHTTPPort.render), send \(DefaultHTTPPort.send), feedback \(DefaultHTTPPort.feedback)"
                }
            ) { reader, settings, defaults throws(ConfigurationError) in
                settings.httpPort = try reader.port("PUSH_HTTP_PORT", default: defaults.httpPort)
            },
            ConfigurationKey(
                "PUSH_ADMIN_PORT", "own port for /healthz, /readyz and /metrics; push-ingest then serves only its API on PUSH_HTTP_PORT",
                default: { $0.adminPort.map(String.init) ?? "PUSH_HTTP_PORT" }
            ) { reader, settings, defaults throws(ConfigurationError) in
                guard reader.string("PUSH_ADMIN_PORT") != nil else {
                    settings.adminPort = defaults.adminPort
                    return
                }
                settings.adminPort = try reader.port("PUSH_ADMIN_PORT", default: 0)
                if settings.adminPort == settings.httpPort, let text = reader.string("PUSH_ADMIN_PORT") {
                    throw reader.invalidValue("PUSH_ADMIN_PORT", text, "is PUSH_HTTP_PORT; leave it unset to serve both there")
                }
            },
            .text("PUSH_HTTP_HOST", \.httpHost, expected: "a host name or IP address", "admin listener address") { text in
                text.isEmpty || text.contains(where: { $0.isWhitespace || $0 == "/" }) ? nil : text
            },
            .text(
                "PUSH_LOG_LEVEL", \.logLevel, expected: "a log level (\(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")))",
                "trace, debug, info, notice, warning, error, critical", shown: \.rawValue
            ) { text in
                Logger.Level(rawValue: text.lowercased())
            },
            .text(
                "PUSH_LOG_FORMAT", \.logFormat, expected: "a log format (\(LogFormat.allCases.map(\.rawValue).joined(separator: ", ")))",
                "text or json (one object per line)", shown: \.rawValue
            ) { text in
                LogFormat(rawValue: text.lowercased())
            },
            .seconds("PUSH_SHUTDOWN_TIMEOUT_S", \.shutdownTimeout, "seconds SIGTERM may take to drain in-flight work"),
            .seconds("PUSH_REPORT_TTL_S", \.reportTTL, "seconds a request's delivery report is kept after its last change"),
        ]
    )

    /// The `--help` section every service prints.
    public static var environmentHelp: String { table.help(defaults: PushConfiguration(httpPort: DefaultHTTPPort.ingest)) }
}
