import COpenSSL
import CNghttp2
import Glibc

/// The one place C failures become ``APNsClientError``s: errno, OpenSSL's error queue and nghttp2's
/// error codes.
extension APNsClientError {
    /// `what` failed with `errno`.
    static func posix(_ code: Code, _ what: String, errno number: Int32 = errno) -> APNsClientError {
        APNsClientError(code, "\(what): \(String(cString: strerror(number)))")
    }

    /// `what` failed; the message carries (and clears) this thread's OpenSSL error queue.
    static func openSSL(_ code: Code, _ what: String) -> APNsClientError {
        let details = openSSLErrorQueue()
        return APNsClientError(code, details.isEmpty ? what : "\(what): \(details)")
    }

    /// `what` failed with nghttp2 error `result`.
    static func nghttp2(_ what: String, _ result: Int32) -> APNsClientError {
        APNsClientError(.protocolError, "\(what): \(String(cString: nghttp2_strerror(result)))")
    }

    /// Drains this thread's OpenSSL error queue into one line (see ``drainOpenSSLErrorQueue()``).
    static func openSSLErrorQueue() -> String {
        drainOpenSSLErrorQueue()
    }
}
