import Foundation
import IOSupport

/// Where a Redis server listens, for connecting and for naming it in logs and errors.
public struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host:port`, with an IPv6 address in brackets.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// How to reach and talk to Redis.
///
/// Usually built from a URL (``init(url:source:)``), e.g. the `PUSH_REDIS_URL` environment variable:
///
///     redis://[[user]:password@]host[:port][/db][?option=value&…]
///
/// - `host` is a name, an IPv4 address or an IPv6 address in brackets; `port` defaults to 6379 and
///   `db` to 0.
/// - `:password@` authenticates with `AUTH password` (the `default` user); `user:password@` with
///   `AUTH user password` (Redis 6 ACL). Both are percent-decoded, so write `@` as `%40`.
/// - Options: `connect_timeout_ms` (default 2000), `command_timeout_ms` (default 2000),
///   `pool_size` (connections in a ``RedisClient``, default 2).
/// - `rediss://` (TLS) is rejected: the hiredis 0.14 on Debian bookworm is built without SSL.
/// - A Redis Cluster: `redis+cluster://[credentials@]host:port,host:port,…[?options]` lists seed
///   nodes; the client learns every node and slot from them (``clusterSeeds``). `pool_size` is then
///   per node.
///
/// The password is never part of ``description``, log lines or errors.
public struct RedisConfiguration: Sendable, Equatable, CustomStringConvertible {
    /// The server; for a Redis Cluster, the first seed (and, in the per-node configurations the
    /// cluster client makes, that node).
    public var endpoint: RedisEndpoint
    /// A Redis Cluster's seed nodes (`redis+cluster://`); empty for a single server. A
    /// ``RedisClient`` learns the cluster's nodes and slots from the first seed that answers.
    public var clusterSeeds: [RedisEndpoint] = []
    /// Whether this names a Redis Cluster.
    public var isCluster: Bool { !clusterSeeds.isEmpty }
    /// The logical database chosen with `SELECT` after connecting (when not 0).
    public var database: Int
    /// The ACL user for `AUTH user password`; `nil` authenticates as the `default` user.
    public var username: String?
    /// `nil` skips `AUTH`.
    public var password: String?
    /// Bound on opening the TCP connection (hiredis `redisConnectWithTimeout`).
    public var connectTimeout: Duration
    /// Bound on each blocking send and receive (hiredis `redisSetTimeout`), and on how long a command
    /// waits for a connection while Redis is unreachable.
    public var commandTimeout: Duration
    /// Connections a ``RedisClient`` opens, each with its own thread. Two matches this machine's two
    /// cores; more rarely helps because one connection already pipelines concurrent callers.
    public var poolSize: Int
    /// How reconnection attempts are spaced.
    public var reconnectBackoff: Backoff

    public static let defaultPort = 6379
    public static let defaultConnectTimeout: Duration = .milliseconds(2000)
    public static let defaultCommandTimeout: Duration = .milliseconds(2000)
    public static let defaultPoolSize = 2

    public init(
        host: String,
        port: Int = RedisConfiguration.defaultPort,
        database: Int = 0,
        username: String? = nil,
        password: String? = nil,
        connectTimeout: Duration = RedisConfiguration.defaultConnectTimeout,
        commandTimeout: Duration = RedisConfiguration.defaultCommandTimeout,
        poolSize: Int = RedisConfiguration.defaultPoolSize,
        reconnectBackoff: Backoff = .redis
    ) {
        self.endpoint = RedisEndpoint(host: host, port: port)
        self.database = database
        self.username = username
        self.password = password
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
        self.poolSize = poolSize
        self.reconnectBackoff = reconnectBackoff
    }

    /// Reads the URL from the environment variable `key` (by default `PUSH_REDIS_URL`).
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        key: String = "PUSH_REDIS_URL"
    ) throws(RedisError) -> RedisConfiguration {
        guard let url = environment[key], !url.isEmpty else {
            throw RedisError.invalidURL("\(key) is not set (expected redis://[:password@]host[:port][/db])", field: key)
        }
        return try RedisConfiguration(url: url, source: key)
    }

    /// The server, database and user, never the password: `redis://user:***@host:port/db`.
    public var description: String {
        var credentials = ""
        if password != nil { credentials = "\(username ?? ""):***@" } else if let username { credentials = "\(username)@" }
        if isCluster {
            return "redis+cluster://\(credentials)\(clusterSeeds.map(\.description).joined(separator: ","))/0"
        }
        return "redis://\(credentials)\(endpoint)/\(database)"
    }
}
