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

    /// Drains this thread's OpenSSL error queue into one line (at most 8 entries).
    static func openSSLErrorQueue() -> String {
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
}
