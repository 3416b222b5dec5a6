import Foundation
import Glibc

/// A forward proxy reached with HTTP `CONNECT` (RFC 9110 §9.3.6), as many production networks
/// require for anything leaving them: `http://[user:password@]host:port`. Only the tunnel request
/// goes to the proxy in the clear; TLS (and ALPN `h2`) runs end to end through the tunnel, so the
/// proxy sees the destination's name and port and nothing else.
public struct HTTPConnectProxy: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int
    public let username: String?
    public let password: String?

    /// Parses `http://[user:password@]host[:port]` (port 80 when absent; user and password
    /// percent-decoded). Nil for anything else: another scheme, a path, no host.
    public init?(url: String) {
        guard url.lowercased().hasPrefix("http://") else { return nil }
        var rest = Substring(url.dropFirst("http://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else { return nil }
        var username: String?
        var password: String?
        // The credentials end at the last '@' (a password may hold a raw '@').
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let parts = userInfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let user = String(parts[0]).removingPercentEncoding, !user.isEmpty else { return nil }
            username = user
            password = parts.count == 2 ? String(parts[1]).removingPercentEncoding ?? String(parts[1]) : ""
        }
        var host = String(rest)
        var port = 80
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") {
                guard let given = Int(after.dropFirst()), (1...65535).contains(given) else { return nil }
                port = given
            } else if !after.isEmpty {
                return nil
            }
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            guard let given = Int(host[host.index(after: colon)...]), (1...65535).contains(given) else { return nil }
            port = given
            host = String(host[..<colon])
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || ".-:".contains($0) }) else { return nil }
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// The proxy's URL with the password masked: `http://user:***@host:port`.
    public var description: String {
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        guard let username else { return "http://\(authority)" }
        return "http://\(username):***@\(authority)"
    }

    /// The `CONNECT` request for `host:port`.
    func connectRequest(host target: String, port targetPort: Int) -> [UInt8] {
        let authority = target.contains(":") ? "[\(target)]:\(targetPort)" : "\(target):\(targetPort)"
        var request = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let username {
            let credentials = Data("\(username):\(password ?? "")".utf8).base64EncodedString()
            request += "Proxy-Authorization: Basic \(credentials)\r\n"
        }
        return Array((request + "\r\n").utf8)
    }

    /// The status of a proxy's answer head (`HTTP/1.1 200 Connection established`): its code and
    /// the whole status line; nil when it is not an HTTP status line.
    static func status(of head: String) -> (code: Int, line: String)? {
        // By scalars: "\r\n" is one Character in Swift, so a Character test would never stop at it.
        let line = String(String.UnicodeScalarView(head.unicodeScalars.prefix { $0 != "\r" && $0 != "\n" }))
        let parts = line.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let code = Int(parts[1]), (100...599).contains(code) else { return nil }
        return (code, line)
    }

    /// The longest answer head read from a proxy.
    static let maximumHead = 16 * 1024

    /// A connected socket to `host:port` through the proxy, ready for the TLS handshake; the caller
    /// owns it. Errors are of kind ``TransportError/Kind/connect`` and name the proxy (password
    /// masked) and what it answered.
    public func openTunnel(to target: String, port targetPort: Int, deadline: UInt64, now: () -> UInt64) throws(TransportError) -> Int32 {
        let fd: Int32
        do {
            fd = try TCPConnector.connect(host: host, port: port, deadline: deadline, now: now)
        } catch {
            throw TransportError(.connect, "the proxy \(self): \(error.message)")
        }
        do throws(TransportError) {
            try send(connectRequest(host: target, port: targetPort), on: fd, deadline: deadline, now: now)
            let head = try readHead(fd, deadline: deadline, now: now)
            guard let status = Self.status(of: head) else {
                throw TransportError(.connect, "the proxy \(self) did not answer CONNECT with an HTTP status line")
            }
            guard (200...299).contains(status.code) else {
                throw TransportError(.connect, "the proxy \(self) refused the tunnel to \(target):\(targetPort): \(status.line)")
            }
            return fd
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    private func send(_ bytes: [UInt8], on fd: Int32, deadline: UInt64, now: () -> UInt64) throws(TransportError) {
        var sent = 0
        while sent < bytes.count {
            let result = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if result > 0 {
                sent += result
                continue
            }
            guard result < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw TransportError.posix(.connect, "sending CONNECT to the proxy \(self)")
            }
            try wait(fd, for: Int16(POLLOUT), deadline: deadline, now: now)
        }
    }

    /// Reads the proxy's answer head, up to its blank line; no byte after it (the tunnel's first
    /// bytes are the TLS server's, which speaks only after our ClientHello).
    private func readHead(_ fd: Int32, deadline: UInt64, now: () -> UInt64) throws(TransportError) -> String {
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !(head.count >= 4 && head[(head.count - 4)...].elementsEqual([13, 10, 13, 10])) {
            guard head.count < Self.maximumHead else { throw TransportError(.connect, "the proxy \(self) sent an answer head over 16 KiB") }
            let result = recv(fd, &byte, 1, 0)
            if result == 1 {
                head.append(byte)
                continue
            }
            if result == 0 { throw TransportError(.connect, "the proxy \(self) closed the connection before answering CONNECT") }
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw TransportError.posix(.connect, "reading the proxy \(self)'s answer")
            }
            try wait(fd, for: Int16(POLLIN), deadline: deadline, now: now)
        }
        return String(decoding: head, as: UTF8.self)
    }

    private func wait(_ fd: Int32, for events: Int16, deadline: UInt64, now: () -> UInt64) throws(TransportError) {
        let time = now()
        guard time < deadline else { throw TransportError(.connect, "the proxy \(self) did not set up the tunnel in time") }
        var descriptor = pollfd(fd: fd, events: events, revents: 0)
        _ = poll(&descriptor, 1, Int32(max((deadline - time) / 1_000_000, 1)))
    }
}
