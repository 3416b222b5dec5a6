import APNs
import COpenSSL
import CNghttp2
import Glibc

/// The one place C failures become ``SandboxError``s: errno, OpenSSL's error queue and nghttp2's
/// error codes.
extension SandboxError {
    /// `what` failed with the current `errno`.
    static func posix(_ code: Code, _ what: String, errno number: Int32 = errno) -> SandboxError {
        SandboxError(code, "\(what): \(String(cString: strerror(number)))")
    }

    /// `what` failed; the message carries (and clears) OpenSSL's error queue for this thread.
    static func openSSL(_ code: Code, _ what: String) -> SandboxError {
        let details = openSSLErrorQueue()
        return SandboxError(code, details.isEmpty ? what : "\(what): \(details)")
    }

    /// `what` failed with nghttp2 error `result`.
    static func nghttp2(_ what: String, _ result: Int32) -> SandboxError {
        SandboxError(.http2, "\(what): \(String(cString: nghttp2_strerror(result)))")
    }

    /// Drains this thread's OpenSSL error queue into one line (see ``drainOpenSSLErrorQueue()``).
    static func openSSLErrorQueue() -> String {
        drainOpenSSLErrorQueue()
    }
}
