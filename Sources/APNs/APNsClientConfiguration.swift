import Foundation
import HTTP2Transport

/// A forward proxy the client reaches APNs through, with HTTP `CONNECT`: `http://[user:password@]host:port`.
/// TLS and ALPN run end to end through the tunnel. Its ``description`` masks the password.
public struct APNsProxy: Sendable, Equatable, CustomStringConvertible {
    let proxy: HTTPConnectProxy

    /// - Throws: ``APNsClientError/Code/invalidRequest`` for anything but
    ///   `http://[user:password@]host[:port]`.
    public init(url: String) throws(APNsClientError) {
        guard let proxy = HTTPConnectProxy(url: url) else {
            throw APNsClientError(.invalidRequest, "the proxy must be http://[user:password@]host[:port] (no path)")
        }
        self.proxy = proxy
    }

    public var description: String { proxy.description }
}

/// Where APNs is: Apple's production or development servers, or anything APNs-compatible
/// (`apns-sandbox`) by URL.
public struct APNsEndpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int = 443) {
        self.host = host
        self.port = port
    }

    /// `https://api.push.apple.com` (port 443; Apple also listens on 2197).
    public static let production = APNsEndpoint(host: "api.push.apple.com")
    /// `https://api.sandbox.push.apple.com`, for development builds of apps.
    public static let development = APNsEndpoint(host: "api.sandbox.push.apple.com")

    /// Parses `https://host[:port]` (a path or anything else is refused).
    public init(url: String) throws(APNsClientError) {
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "https",
            let host = components.host, !host.isEmpty,
            components.path.isEmpty || components.path == "/", components.query == nil
        else {
            throw APNsClientError(.invalidRequest, "endpoint '\(url)' must be https://host[:port]")
        }
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        self.port = components.port ?? 443
    }

    /// `host:port`, the `:authority` of requests.
    public var authority: String { port == 443 ? host : "\(host):\(port)" }

    public var description: String { "https://\(authority)" }
}

/// How the client proves it may send for an app.
public enum APNsCredentials: Sendable {
    /// Token auth: ES256 provider tokens from a `.p8` key, shared by every connection of the client.
    case token(APNsSigningKey)
    /// Certificate auth: a client certificate and its key, presented in the TLS handshake.
    case certificate(APNsClientCertificate)
}

/// A client certificate for APNs certificate auth, loaded from `.p12` (with password) or PEM files.
public struct APNsClientCertificate: Sendable {
    public enum Source: Sendable, Hashable {
        case pkcs12(file: String, password: String)
        case pem(certificateFile: String, privateKeyFile: String)
    }

    public let source: Source

    public init(source: Source) {
        self.source = source
    }
}

/// The client's settings; every one has a default suited to Apple's servers.
public struct APNsClientConfiguration: Sendable {
    public var endpoint: APNsEndpoint
    public var credentials: APNsCredentials
    /// Extra CA certificates (PEM) to trust besides the system's, e.g. apns-sandbox's CA.
    public var caFile: String?
    /// The forward proxy to reach APNs through (HTTP `CONNECT`); nil connects directly.
    public var proxy: APNsProxy?
    /// Connections kept to the endpoint (each carries up to the server's concurrent-stream limit).
    public var connections: Int = 2
    /// Requests waiting for a free stream, across connections; past it ``APNsClient/send(_:timeout:)``
    /// fails at once with ``APNsClientError/Code/overloaded``.
    public var maximumPendingRequests: Int = 50_000
    /// How long one notification may take, queueing included, unless the call names its own.
    public var requestTimeout: Duration = .seconds(30)
    /// TCP connect plus TLS handshake.
    public var connectTimeout: Duration = .seconds(10)
    /// A PING is sent on a connection idle this long; no answer within ``connectTimeout`` drops it.
    public var pingInterval: Duration = .seconds(60)
    /// A connection with nothing to do for this long is closed (reopened on demand).
    public var idleTimeout: Duration = .seconds(30 * 60)
    /// Age at which the shared provider token is replaced (20–59 minutes).
    public var providerTokenRefreshAge: Duration = .seconds(40 * 60)
    /// The clock provider tokens are issued by (seconds since 1970); tests move it.
    public var providerTokenClock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    /// Each connection opens at most this often, however its last one ended: Apple treats rapid
    /// connect/disconnect cycles as a denial-of-service attack. Failures add the backoff on top.
    public var minimumConnectInterval: Duration = .seconds(1)
    /// Called for every GOAWAY APNs sends (on a connection thread: keep it short), e.g. to count them.
    public var onGoaway: (@Sendable (APNsGoaway) -> Void)?

    public init(endpoint: APNsEndpoint, credentials: APNsCredentials, caFile: String? = nil) {
        self.endpoint = endpoint
        self.credentials = credentials
        self.caFile = caFile
    }
}
