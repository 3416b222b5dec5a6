/// An error from the AMQP client, with a message a person can act on.
///
/// A struct around a private code, so new cases can be added without breaking callers; compare with
/// the static members (`error.code == .connectionLost`) or read ``isRetryable``.
public struct AMQPError: Error, Sendable, CustomStringConvertible, Equatable {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable, Hashable {
            case invalidURL
            case connectionFailed
            case loginRefused
            case tlsFailed
            case connectionClosed
            case connectionLost
            case channelClosed
            case unroutable
            case nacked
            case timeout
            case closed
            case protocolError
            case invalidMessage
        }

        fileprivate let base: Base
        public var description: String { base.rawValue }

        /// The message cannot be put on the wire (a property or header name over AMQP's 255 bytes);
        /// it was not sent, and the connection is unharmed.
        public static let invalidMessage = Code(base: .invalidMessage)
        /// The URL could not be parsed or names an unsupported option.
        public static let invalidURL = Code(base: .invalidURL)
        /// The TCP connection could not be opened (refused, unreachable, timed out, DNS).
        public static let connectionFailed = Code(base: .connectionFailed)
        /// The broker refused the credentials or the virtual host.
        public static let loginRefused = Code(base: .loginRefused)
        /// TLS handshake, certificate or hostname verification failed.
        public static let tlsFailed = Code(base: .tlsFailed)
        /// The broker closed the connection (with its reply code and text).
        public static let connectionClosed = Code(base: .connectionClosed)
        /// The connection dropped; a publish failed with this was not confirmed and may or may not
        /// have reached the broker.
        public static let connectionLost = Code(base: .connectionLost)
        /// The broker closed the channel (with its reply code and text, e.g. `NOT_FOUND`).
        public static let channelClosed = Code(base: .channelClosed)
        /// A mandatory publish matched no queue and the broker returned it.
        public static let unroutable = Code(base: .unroutable)
        /// The broker refused to take responsibility for a publish (`basic.nack`).
        public static let nacked = Code(base: .nacked)
        /// An operation did not finish within its timeout.
        public static let timeout = Code(base: .timeout)
        /// The connection was closed by this process.
        public static let closed = Code(base: .closed)
        /// The broker sent something the client did not expect.
        public static let protocolError = Code(base: .protocolError)
    }

    public let code: Code
    /// What went wrong, for people.
    public let message: String
    /// The broker's reply code (e.g. 403, 404, 406, 312), when the broker gave one.
    public let replyCode: Int?

    public init(_ code: Code, _ message: String, replyCode: Int? = nil) {
        self.code = code
        self.message = message
        self.replyCode = replyCode
    }

    public var description: String { "AMQP \(code): \(message)" }

    /// Whether trying again later (after a reconnect) may succeed.
    public var isRetryable: Bool {
        switch code.base {
        case .connectionFailed, .connectionClosed, .connectionLost, .channelClosed, .timeout, .nacked: true
        case .invalidURL, .loginRefused, .tlsFailed, .unroutable, .closed, .protocolError, .invalidMessage: false
        }
    }
}
