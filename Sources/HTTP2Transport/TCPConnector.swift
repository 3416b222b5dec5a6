import Glibc

/// Opens a non-blocking TCP connection (`TCP_NODELAY`, close-on-exec), trying each address the name
/// resolves to until one answers or the deadline passes.
public enum TCPConnector {
    /// A connected socket to `host:port`; the caller owns it. Errors are of kind ``TransportError/Kind/connect``.
    public static func connect(host: String, port: Int, deadline: UInt64, now: () -> UInt64) throws(TransportError) -> Int32 {
        let authority = port == 443 ? host : "\(host):\(port)"
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var addresses: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &addresses)
        guard resolved == 0, let addresses else {
            throw TransportError(.connect, "cannot resolve \(host): \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(addresses) }
        var lastError = TransportError(.connect, "no address for \(host)")
        var candidate: UnsafeMutablePointer<addrinfo>? = addresses
        while let address = candidate {
            candidate = address.pointee.ai_next
            let socketFD = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socketFD >= 0 else {
                lastError = .posix(.connect, "socket")
                continue
            }
            _ = fcntl(socketFD, F_SETFL, fcntl(socketFD, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if Glibc.connect(socketFD, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                if let error = waitConnected(socketFD, deadline: deadline, authority: authority, now: now) {
                    lastError = error
                    Glibc.close(socketFD)
                    continue
                }
                return socketFD
            }
            lastError = .posix(.connect, "connect to \(authority)")
            Glibc.close(socketFD)
        }
        throw lastError
    }

    private static func waitConnected(_ socketFD: Int32, deadline: UInt64, authority: String, now: () -> UInt64) -> TransportError? {
        while true {
            let time = now()
            guard time < deadline else { return TransportError(.connect, "connecting to \(authority) timed out") }
            var descriptor = pollfd(fd: socketFD, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&descriptor, 1, Int32(max((deadline - time) / 1_000_000, 1)))
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { continue }
            var socketError: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(socketFD, SOL_SOCKET, SO_ERROR, &socketError, &length)
            return socketError == 0 ? nil : .posix(.connect, "connect to \(authority)", errno: socketError)
        }
    }

    /// Whether `host` is a literal IPv4 or IPv6 address (checked as an IP, not a name, in certificates).
    public static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
