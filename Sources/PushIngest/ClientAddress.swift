import HTTPTypes
public import Hummingbird

/// Which address the per-client rate limit is keyed by. The TCP peer, unless the peer is one of the
/// operator's trusted proxies (`PUSH_INGEST_TRUSTED_PROXIES`): then the rightmost `X-Forwarded-For`
/// entry that is not itself a trusted proxy, i.e. the first address a proxy of ours saw. Entries to
/// its left were written by the client and prove nothing. An untrusted peer's header is ignored, so
/// nobody can choose their own bucket.
public enum ClientAddress {
    /// The client address for a request from `peer` carrying `forwardedFor` (each `X-Forwarded-For`
    /// header value, in order).
    public static func resolve(peer: String, forwardedFor: [String], trustedProxies: Set<String>) -> String {
        guard trustedProxies.contains(peer) else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
        for hop in hops.reversed() where !trustedProxies.contains(hop) {
            return hop.count <= 64 ? hop : String(hop.prefix(64))
        }
        return hops.first ?? peer
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}

/// Sets the request context's client address from `X-Forwarded-For` when the peer is a trusted proxy
/// (``ClientAddress``); added to the router only when proxies are configured.
struct TrustedProxyMiddleware: RouterMiddleware {
    typealias Context = IngestRequestContext
    let trustedProxies: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let peer = context.remoteAddress?.ipAddress ?? "unknown"
        context.forwardedClientAddress = ClientAddress.resolve(
            peer: peer, forwardedFor: request.headers[values: .xForwardedFor], trustedProxies: trustedProxies)
        return try await next(request, context)
    }
}

extension HTTPField.Name {
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}
