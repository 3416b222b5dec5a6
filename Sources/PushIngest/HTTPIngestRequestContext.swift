public import Hummingbird
public import NIOCore

/// The request context of push-ingest's router: Hummingbird's core storage plus the client's address,
/// which the per-client rate limit is keyed by.
public struct IngestRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer of the connection (a load balancer's address when there is one in front).
    public let remoteAddress: SocketAddress?
    /// The client behind a trusted proxy (``TrustedProxyMiddleware``), when there is one.
    var forwardedClientAddress: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    /// The client's IP address as text (`127.0.0.1`, `::1`): the peer's, or behind a trusted proxy
    /// the forwarded one (``ClientAddress``); `unknown` for a Unix socket peer.
    var clientAddress: String {
        forwardedClientAddress ?? remoteAddress?.ipAddress ?? "unknown"
    }
}
