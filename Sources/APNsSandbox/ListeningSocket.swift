import Glibc
import Synchronization

/// The TCP listening socket on the loopback address, owned here; closed by ``close()`` when the
/// server stops accepting, or at the latest when this object goes.
final class ListeningSocket: Sendable {
    private let descriptor: Mutex<Int32>
    /// The bound port (the one the kernel picked when asked for port 0).
    let port: Int

    init(host: String, port: Int, backlog: Int32 = 1024) throws(SandboxError) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SandboxError.posix(.socket, "socket") }
        var reuse: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            Glibc.close(fd)
            throw SandboxError(.socket, "\(host) is not an IPv4 address")
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let error = SandboxError.posix(.socket, "cannot listen on \(host):\(port)")
            Glibc.close(fd)
            throw error
        }
        guard listen(fd, backlog) == 0 else {
            let error = SandboxError.posix(.socket, "listen on \(host):\(port)")
            Glibc.close(fd)
            throw error
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        self.descriptor = Mutex(fd)
    }

    deinit {
        close()
    }

    /// The descriptor, or -1 once closed.
    var fd: Int32 { descriptor.withLock { $0 } }

    func close() {
        descriptor.withLock { fd in
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }
    }

    /// A new connection, non-blocking with Nagle off; nil when none is waiting. Throws for errors
    /// other than "none waiting" (e.g. out of descriptors).
    func accept() throws(SandboxError) -> Int32? {
        let listener = fd
        guard listener >= 0 else { return nil }
        let connection = Glibc.accept(listener, nil, nil)
        guard connection >= 0 else {
            switch errno {
            case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED: return nil
            default: throw SandboxError.posix(.socket, "accept")
            }
        }
        _ = fcntl(connection, F_SETFL, fcntl(connection, F_GETFL) | O_NONBLOCK)
        _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
        var noDelay: Int32 = 1
        setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        return connection
    }
}
