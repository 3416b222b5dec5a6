import Foundation
import IOSupport

/// One broker of a cluster: where to connect.
public struct AMQPBroker: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host:port`, with an IPv6 address in brackets.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// How to reach and talk to the broker.
///
/// Built from an AMQP URI (`PUSH_AMQP_URL`):
/// `amqp[s]://user:password@host:port/vhost?heartbeat=10&connection_timeout=5000&cacertfile=…&certfile=…&keyfile=…`
/// - A RabbitMQ cluster is several brokers separated by commas: the first entry is a whole URL, each
///   later one a whole URL that differs from it only in host and port, or just `host[:port]`
///   (`amqp://push:secret@rabbit-0:5672/%2f,rabbit-1:5672,rabbit-2:5672`). The connection picks a
///   broker at random (so a fleet of services spreads over the cluster), and on losing it or
///   failing to connect tries the next in turn, spacing full rounds with ``reconnectBackoff``.
///   Write a comma inside a password as `%2C`.
/// - `amqp` defaults to port 5672, `amqps` to 5671; user and password default to `guest`.
/// - The vhost is the percent-decoded path (`/%2f` is `/`); an empty path means `/`.
/// - `heartbeat` (seconds, 0 disables, default 10), `connection_timeout` (ms, default 5000),
///   `channel_max` is not supported.
/// - `amqps` always verifies the broker's certificate and host name: against `cacertfile` (PEM) when
///   given, else the system trust store. `certfile` + `keyfile` present a client certificate.
public struct AMQPConfiguration: Sendable {
    /// Every broker of the cluster, at least one, in the order given.
    public var brokers: [AMQPBroker]
    /// The first broker's host.
    public var host: String { brokers[0].host }
    /// The first broker's port.
    public var port: Int { brokers[0].port }
    public var virtualHost: String
    public var user: String
    public var password: String
    public var tls: TLS?
    /// Heartbeat interval negotiated with the broker; a dead peer is noticed after about twice this.
    public var heartbeat: Duration
    /// Bound on opening the TCP connection and on the AMQP handshake.
    public var connectTimeout: Duration
    /// Bound on each synchronous broker call (declare, qos, consume, channel open).
    public var rpcTimeout: Duration
    /// Shown in the broker's management UI and `rabbitmqctl list_connections client_properties`.
    public var connectionName: String
    /// Publishes sent but not yet confirmed, at most; more wait (back-pressure, not unbounded memory).
    public var maxUnconfirmedPublishes: Int
    /// How long a publish may wait to be sent (e.g. while the broker is down) before it fails.
    public var publishTimeout: Duration
    /// How reconnection attempts are spaced (``Backoff/amqp``).
    public var reconnectBackoff: Backoff

    public struct TLS: Sendable, Equatable {
        public var caCertificateFile: String?
        public var certificateFile: String?
        public var keyFile: String?
    }

    public init(url: String, connectionName: String) throws(AMQPError) {
        let entries = url.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        try self.init(singleURL: entries[0], connectionName: connectionName)
        for entry in entries.dropFirst() {
            brokers.append(try Self.laterBroker(entry, first: entries[0], configuration: self))
        }
        let repeated = Dictionary(grouping: brokers, by: \.self).filter { $0.value.count > 1 }.keys
        if let broker = repeated.first {
            throw AMQPError(.invalidURL, "broker \(broker) is listed twice in '\(Self.redacted(url))'")
        }
    }

    /// A broker after the first: `host[:port]` (the first's scheme, credentials, vhost and options), or
    /// a whole URL that must agree with the first in everything but host and port.
    private static func laterBroker(_ entry: String, first: String, configuration: AMQPConfiguration) throws(AMQPError) -> AMQPBroker {
        guard !entry.isEmpty else {
            throw AMQPError(.invalidURL, "an empty broker in the list '\(Self.redacted(first)),…' (two commas, or one at the end)")
        }
        if entry.contains("://") {
            let other = try AMQPConfiguration(singleURL: entry, connectionName: configuration.connectionName)
            guard other.tls == configuration.tls, other.user == configuration.user, other.password == configuration.password,
                other.virtualHost == configuration.virtualHost, other.heartbeat == configuration.heartbeat,
                other.connectTimeout == configuration.connectTimeout
            else {
                throw AMQPError(
                    .invalidURL,
                    "'\(Self.redacted(entry))' differs from the first broker in more than host and port (one cluster has one scheme, user, vhost and options)"
                )
            }
            return other.brokers[0]
        }
        let defaultPort = configuration.tls == nil ? 5672 : 5671
        var host = Substring(entry)
        var port = defaultPort
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else {
                throw AMQPError(.invalidURL, "broker '\(entry)': an IPv6 address needs its closing ]")
            }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let number = Int(rest.dropFirst()) else {
                    throw AMQPError(.invalidURL, "broker '\(entry)': invalid port '\(rest.dropFirst())'")
                }
                port = number
            }
        } else if let colon = host.lastIndex(of: ":") {
            let text = host[host.index(after: colon)...]
            guard let number = Int(text) else { throw AMQPError(.invalidURL, "broker '\(entry)': invalid port '\(text)'") }
            port = number
            host = host[..<colon]
        }
        guard !host.isEmpty, !host.contains(where: { "/?@# ".contains($0) }) else {
            throw AMQPError(.invalidURL, "broker '\(entry)' is neither host[:port] nor an amqp:// URL")
        }
        guard (1...65535).contains(port) else { throw AMQPError(.invalidURL, "broker '\(entry)': port \(port) is not in 1–65535") }
        return AMQPBroker(host: String(host), port: port)
    }

    private init(singleURL url: String, connectionName: String) throws(AMQPError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            if let port = Self.unparsablePort(in: url) {
                throw AMQPError(.invalidURL, "invalid port '\(port)' in '\(Self.redacted(url))'")
            }
            throw AMQPError(.invalidURL, "'\(Self.redacted(url))' is not a URL (expected amqp://user:password@host:port/vhost)")
        }
        switch scheme {
        case "amqp": self.tls = nil
        case "amqps": self.tls = TLS()
        default:
            throw AMQPError(.invalidURL, "unsupported scheme '\(scheme)' in '\(Self.redacted(url))' (expected amqp or amqps)")
        }
        guard let host = components.host, !host.isEmpty else {
            throw AMQPError(.invalidURL, "no host in '\(Self.redacted(url))'")
        }
        let port: Int
        if let given = components.port {
            guard (1...65535).contains(given) else {
                throw AMQPError(.invalidURL, "port \(given) in '\(Self.redacted(url))' is not in 1–65535")
            }
            port = given
        } else {
            if let port = Self.unparsablePort(in: url) {
                throw AMQPError(.invalidURL, "invalid port '\(port)' in '\(Self.redacted(url))'")
            }
            port = scheme == "amqps" ? 5671 : 5672
        }
        self.brokers = [AMQPBroker(host: host, port: port)]
        self.user = components.user.map { $0.removingPercentEncoding ?? $0 } ?? "guest"
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 } ?? "guest"
        let path = components.percentEncodedPath
        if path.isEmpty || path == "/" {
            self.virtualHost = "/"
        } else {
            let encoded = String(path.dropFirst())
            guard !encoded.contains("/"), let decoded = encoded.removingPercentEncoding else {
                throw AMQPError(.invalidURL, "virtual host '\(encoded)' in '\(Self.redacted(url))' must be one path segment (write '/' as %2f)")
            }
            self.virtualHost = decoded
        }
        self.heartbeat = .seconds(10)
        self.connectTimeout = .seconds(5)
        self.rpcTimeout = .seconds(15)
        self.connectionName = connectionName
        self.maxUnconfirmedPublishes = 2000
        self.publishTimeout = .seconds(30)
        self.reconnectBackoff = .amqp
        for item in components.queryItems ?? [] {
            let value = item.value ?? ""
            switch item.name {
            case "heartbeat":
                guard let seconds = Int(value), (0...3600).contains(seconds) else {
                    throw AMQPError(.invalidURL, "heartbeat '\(value)' must be whole seconds in 0–3600")
                }
                self.heartbeat = .seconds(seconds)
            case "connection_timeout":
                guard let milliseconds = Int(value), milliseconds > 0 else {
                    throw AMQPError(.invalidURL, "connection_timeout '\(value)' must be a positive number of milliseconds")
                }
                self.connectTimeout = .milliseconds(milliseconds)
            case "cacertfile", "certfile", "keyfile":
                guard self.tls != nil else {
                    throw AMQPError(.invalidURL, "\(item.name) needs an amqps:// URL")
                }
                switch item.name {
                case "cacertfile": self.tls?.caCertificateFile = value
                case "certfile": self.tls?.certificateFile = value
                default: self.tls?.keyFile = value
                }
            default:
                throw AMQPError(
                    .invalidURL,
                    "unknown option '\(item.name)' in '\(Self.redacted(url))' (known: heartbeat, connection_timeout, cacertfile, certfile, keyfile)")
            }
        }
        if let tls, (tls.certificateFile == nil) != (tls.keyFile == nil) {
            throw AMQPError(.invalidURL, "certfile and keyfile must be given together")
        }
    }

    /// The broker addresses for log lines and errors (never the password).
    public var endpointDescription: String {
        brokers.map { endpointDescription(of: $0) }.joined(separator: ",")
    }

    /// One broker's address for log lines and errors.
    public func endpointDescription(of broker: AMQPBroker) -> String {
        "\(tls == nil ? "amqp" : "amqps")://\(broker)/\(virtualHost == "/" ? "%2f" : virtualHost)"
    }

    /// The text after the host's colon when it is not a number (`amqp://host:abc/`).
    private static func unparsablePort(in url: String) -> Substring? {
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let rest = url[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        let hostPort = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? authority
        guard !hostPort.hasSuffix("]"), let colon = hostPort.lastIndex(of: ":") else { return nil }
        let port = hostPort[hostPort.index(after: colon)...]
        return port.isEmpty || port.contains(where: { !$0.isNumber }) ? port : nil
    }

    /// The URL (or each URL of a broker list) with any password replaced, for error messages.
    public static func redacted(_ url: String) -> String {
        guard !url.contains(",") else {
            return url.split(separator: ",", omittingEmptySubsequences: false).map { redacted(String($0)) }.joined(separator: ",")
        }
        guard let at = url.lastIndex(of: "@"), let schemeEnd = url.range(of: "://") else { return url }
        let userInfo = url[schemeEnd.upperBound..<at]
        guard let colon = userInfo.firstIndex(of: ":") else { return url }
        return url.replacingCharacters(in: url.index(after: colon)..<at, with: "***")
    }
}
