import COpenSSL

/// Drains this thread's OpenSSL error queue into one line (at most 8 entries), for error messages.
/// Shared by the client and apns-sandbox, the package's two OpenSSL users.
package func drainOpenSSLErrorQueue() -> String {
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
