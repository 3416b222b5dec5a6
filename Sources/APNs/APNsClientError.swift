/// Why a notification got no answer from APNs: the transport, not APNs' verdict (a refusal is an
/// ``APNsResponse`` with its status and reason). Every case says whether sending again can help.
public struct APNsClientError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        /// TCP connect or TLS handshake failed (refused, unreachable, certificate not trusted, no `h2`).
        case connectFailed
        /// The connection dropped (or was reset) with the request in flight; APNs may or may not have
        /// accepted it.
        case connectionLost
        /// No answer within the request timeout.
        case timeout
        /// The client's request queue is full: back off and try again (back-pressure).
        case overloaded
        /// The client is shutting down (or was shut down) and takes no more requests.
        case shutdown
        /// The notification breaks an APNs rule and was not sent (see ``APNsRequestError``).
        case invalidRequest
        /// The credentials are unusable (a bad `.p8`, certificate or password).
        case credentials
        /// An HTTP/2 protocol error other than the above.
        case protocolError
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Whether sending the same notification again later can succeed.
    public var isRetryable: Bool {
        switch code {
        case .connectFailed, .connectionLost, .timeout, .overloaded, .protocolError: true
        case .shutdown, .invalidRequest, .credentials: false
        }
    }

    public var description: String { "\(code): \(message)" }
}
