import CNghttp2
import COpenSSL
import Glibc

/// A failure of the transport (socket, TLS, HTTP/2), with a message a person can act on. The APNs
/// client and apns-sandbox turn it into their own error, choosing the code by where it happened.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable, Hashable {
            case system, connect, tls, certificate, http2
        }

        fileprivate let base: Base
        public var description: String { base.rawValue }

        /// A system call failed (socket, pipe, poll).
        public static let system = Kind(base: .system)
        /// Resolving, connecting or the TLS handshake failed, or timed out.
        public static let connect = Kind(base: .connect)
        /// Setting up or running TLS failed.
        public static let tls = Kind(base: .tls)
        /// A certificate, key or CA file cannot be read or used.
        public static let certificate = Kind(base: .certificate)
        /// nghttp2 refused an operation or the peer broke the protocol.
        public static let http2 = Kind(base: .http2)
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    // MARK: The one place C failures become Swift errors

    /// `what` failed with `errno`.
    static func posix(_ kind: Kind, _ what: String, errno number: Int32 = errno) -> TransportError {
        TransportError(kind, "\(what): \(String(cString: strerror(number)))")
    }

    /// `what` failed; the message carries (and clears) this thread's OpenSSL error queue.
    static func openSSL(_ kind: Kind, _ what: String) -> TransportError {
        let details = drainOpenSSLErrorQueue()
        return TransportError(kind, details.isEmpty ? what : "\(what): \(details)")
    }

    /// `what` failed with nghttp2 error `result`.
    static func nghttp2(_ what: String, _ result: Int) -> TransportError {
        TransportError(.http2, "\(what): \(http2ErrorText(result))")
    }
}

/// nghttp2's text for a (negative) library error code.
public func http2ErrorText(_ result: Int) -> String {
    String(cString: nghttp2_strerror(Int32(clamping: result)))
}

/// Drains this thread's OpenSSL error queue into one line (at most 8 entries), for error messages.
public func drainOpenSSLErrorQueue() -> String {
    var entries: [String] = []
    for _ in 0..<8 {
        let code = ERR_get_error()
        guard code != 0 else { break }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        entries.append(String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    ERR_clear_error()
    return entries.joined(separator: "; ")
}
