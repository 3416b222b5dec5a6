import HTTPTypes
public import Hummingbird
import PushServiceKit

/// Sets the request context's client address from `X-Forwarded-For` when the peer is a trusted proxy
/// (``PushServiceKit/TrustedProxies``); added to the router only when proxies are configured.
struct TrustedProxyMiddleware: RouterMiddleware {
    typealias Context = IngestRequestContext
    let trustedProxies: TrustedProxies

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let peer = context.remoteAddress?.ipAddress ?? "unknown"
        context.forwardedClientAddress = trustedProxies.clientAddress(peer: peer, forwardedFor: request.headers[values: .xForwardedFor])
        return try await next(request, context)
    }
}

extension HTTPField.Name {
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}
