/// An error starting or running apns-sandbox, with a message a person can act on.
///
/// A struct around a private code, so new cases can be added without breaking callers; compare with
/// the static members (`error.code == .tls`).
public struct SandboxError: Error, Sendable, CustomStringConvertible, Equatable {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable, Hashable {
            case configuration
            case certificate
            case tls
            case socket
            case http2
        }

        fileprivate let base: Base
        public var description: String { base.rawValue }

        /// A flag or setting is unusable (names the flag).
        public static let configuration = Code(base: .configuration)
        /// A certificate, key or CA file cannot be read or used, or generating one failed.
        public static let certificate = Code(base: .certificate)
        /// Setting up TLS failed.
        public static let tls = Code(base: .tls)
        /// A socket could not be opened, bound or listened on (e.g. the port is taken).
        public static let socket = Code(base: .socket)
        /// nghttp2 refused to set up a session.
        public static let http2 = Code(base: .http2)
    }

    public let code: Code
    /// What went wrong, for people.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "apns-sandbox \(code): \(message)" }
}
