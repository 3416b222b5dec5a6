import Foundation
import Glibc
import Synchronization

/// A forward proxy on 127.0.0.1 that answers HTTP `CONNECT` (as a company's egress proxy does) and
/// then pipes bytes both ways, for tests of clients that must reach APNs through one. Optionally
/// requires `Proxy-Authorization: Basic` for `credentials`; records each CONNECT target and the
/// authorization it came with. Tunnels go only to loopback addresses.
public final class ConnectProxy: Sendable {
    public let port: Int
    private let listener: Int32
    private let state = Mutex<(targets: [String], authorizations: [String?], open: Bool)>(([], [], true))
    private let credentials: (user: String, password: String)?

    /// The targets asked for (`host:port`), in order.
    public var targets: [String] { state.withLock { $0.targets } }
    /// The `Proxy-Authorization` header of each CONNECT (nil when absent).
    public var authorizations: [String?] { state.withLock { $0.authorizations } }

    public init(credentials: (user: String, password: String)? = nil) throws {
        self.credentials = credentials
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ChildProcessError("socket() failed: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw ChildProcessError("bind/listen failed: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        listener = fd
        Thread { [self] in acceptLoop() }.start()
    }

    /// Stops accepting (tunnels already open end with their connections).
    public func stop() {
        state.withLock { $0.open = false }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while state.withLock({ $0.open }) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            Thread { [self] in serve(client) }.start()
        }
    }

    private func serve(_ client: Int32) {
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !(head.count >= 4 && head[(head.count - 4)...].elementsEqual([13, 10, 13, 10])), head.count < 16384 {
            guard recv(client, &byte, 1, 0) == 1 else {
                close(client)
                return
            }
            head.append(byte)
        }
        let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = lines.first?.split(separator: " ") ?? []
        let authorization = lines.first { $0.lowercased().hasPrefix("proxy-authorization:") }.map {
            String($0.dropFirst("proxy-authorization:".count)).trimmingCharacters(in: .whitespaces)
        }
        guard requestLine.count == 3, requestLine[0] == "CONNECT" else {
            answer(client, "HTTP/1.1 405 Method Not Allowed")
            return
        }
        let target = String(requestLine[1])
        state.withLock {
            $0.targets.append(target)
            $0.authorizations.append(authorization)
        }
        if let credentials {
            let expected = "Basic " + Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
            guard authorization == expected else {
                answer(client, "HTTP/1.1 407 Proxy Authentication Required", extra: "Proxy-Authenticate: Basic realm=\"test\"\r\n")
                return
            }
        }
        guard let colon = target.lastIndex(of: ":"), let port = UInt16(target[target.index(after: colon)...]),
            ["127.0.0.1", "localhost"].contains(String(target[..<colon]))
        else {
            answer(client, "HTTP/1.1 403 Forbidden")
            return
        }
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(port.bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard upstream >= 0, connected == 0 else {
            if upstream >= 0 { close(upstream) }
            answer(client, "HTTP/1.1 502 Bad Gateway")
            return
        }
        let established = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)
        _ = established.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        Thread { Self.pipe(from: upstream, to: client) }.start()
        Self.pipe(from: client, to: upstream)
    }

    private func answer(_ client: Int32, _ status: String, extra: String = "") {
        let bytes = Array("\(status)\r\n\(extra)Content-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        _ = bytes.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        close(client)
    }

    /// Copies `from` to `to` until `from` ends, then ends both.
    private static func pipe(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = recv(source, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            var sent = 0
            while sent < count {
                let result = buffer[sent..<count].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard result > 0 else { break }
                sent += result
            }
            if sent < count { break }
        }
        shutdown(source, Int32(SHUT_RDWR))
        shutdown(destination, Int32(SHUT_RDWR))
        close(source)
    }
}
