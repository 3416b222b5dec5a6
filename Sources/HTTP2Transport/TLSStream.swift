import COpenSSL
import Glibc

/// What a TLS step came to. `SSL_get_error` is read in one place (``TLSStream/outcome(of:)``), and
/// every caller (handshake, read, write, on either side) acts on this value.
public enum TLSIO: Equatable {
    /// Bytes moved (read or written), or the handshake finished (`0`).
    case done(Int)
    /// Nothing until the socket is readable.
    case wantRead
    /// Nothing until the socket is writable.
    case wantWrite
    /// The peer closed TLS cleanly (`close_notify`).
    case closed
    /// TLS or the socket failed; `details` holds the OpenSSL error queue (may be empty).
    case failed(details: String)
}

/// What a server learns from a client certificate.
public enum TLSPeerCertificate: Equatable {
    /// None was asked for or sent.
    case none
    /// One was sent but does not chain to the configured client CA.
    case untrusted
    /// A trusted one, with its subject's `UID` (APNs puts the bundle id there).
    case trusted(userID: String?)
}

/// One TLS connection over a connected non-blocking socket: owns the socket and its `SSL` (both
/// freed in `deinit`, or by ``close(abort:)``), never touched by two threads.
public final class TLSStream {
    public enum Role {
        /// Sends SNI and checks the server's certificate against `host` (a name or an IP address).
        case client(host: String)
        case server
    }

    public let fd: Int32
    private let ssl: OpaquePointer
    private var isClosed = false

    /// Takes ownership of `fd` (closed here even if this throws).
    public init(context: TLSContext, fd: Int32, role: Role) throws(TransportError) {
        guard let ssl = SSL_new(context.pointer) else {
            Glibc.close(fd)
            throw TransportError.openSSL(.tls, "SSL_new failed")
        }
        self.ssl = ssl
        self.fd = fd
        // From here on deinit frees the SSL and closes fd if a step throws.
        guard SSL_set_fd(ssl, fd) == 1 else { throw TransportError.openSSL(.tls, "SSL_set_fd failed") }
        switch role {
        case .server:
            SSL_set_accept_state(ssl)
        case .client(let host):
            SSL_set_connect_state(ssl)
            if TCPConnector.isIPAddress(host) {
                guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 else {
                    throw TransportError.openSSL(.tls, "cannot check the certificate for \(host)")
                }
            } else {
                guard push_SSL_set_tlsext_host_name(ssl, host) == 1, SSL_set1_host(ssl, host) == 1 else {
                    throw TransportError.openSSL(.tls, "cannot set the server name \(host)")
                }
            }
        }
    }

    deinit {
        SSL_free(ssl)
        if !isClosed { Glibc.close(fd) }
    }

    // MARK: Steps

    /// One handshake step (non-blocking).
    public func handshakeStep() -> TLSIO {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        return result == 1 ? .done(0) : outcome(of: result)
    }

    /// Reads into `buffer`.
    @inline(__always)
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> TLSIO {
        ERR_clear_error()
        let count = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        return count > 0 ? .done(Int(count)) : outcome(of: count)
    }

    /// Writes from `bytes` (partial writes allowed).
    @inline(__always)
    public func write(_ bytes: UnsafeRawBufferPointer) -> TLSIO {
        ERR_clear_error()
        let count = SSL_write(ssl, bytes.baseAddress, Int32(clamping: bytes.count))
        return count > 0 ? .done(Int(count)) : outcome(of: count)
    }

    /// The one reading of `SSL_get_error` for a result ≤ 0.
    private func outcome(of result: Int32) -> TLSIO {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN:
            ERR_clear_error()
            return .closed
        default: return .failed(details: drainOpenSSLErrorQueue())
        }
    }

    // MARK: Client handshake

    /// Runs the client handshake to the end, waiting in `poll` until `deadline` (monotonic ns), then
    /// checks that the server agreed to `h2`. Messages name `host` and say what failed.
    public func handshake(host: String, deadline: UInt64, now: () -> UInt64) throws(TransportError) {
        while true {
            let events: Int16
            switch handshakeStep() {
            case .done:
                guard negotiatedHTTP2 else { throw TransportError(.connect, "\(host) did not agree to HTTP/2 (ALPN h2)") }
                return
            case .wantRead: events = Int16(POLLIN)
            case .wantWrite: events = Int16(POLLOUT)
            case .closed, .failed:
                let verification = SSL_get_verify_result(ssl)
                if verification != Int(X509_V_OK) {
                    ERR_clear_error()
                    let why = String(cString: X509_verify_cert_error_string(verification))
                    throw TransportError(.connect, "the certificate of \(host) is not trusted: \(why)")
                }
                throw TransportError.openSSL(.connect, "TLS handshake with \(host) failed")
            }
            let time = now()
            guard time < deadline else { throw TransportError(.connect, "TLS handshake with \(host) timed out") }
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            _ = poll(&descriptor, 1, Int32(max((deadline - time) / 1_000_000, 1)))
        }
    }

    // MARK: After the handshake

    /// Whether ALPN chose `h2`.
    public var negotiatedHTTP2: Bool {
        var protocolName: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &protocolName, &length)
        guard let protocolName, length == 2 else { return false }
        return protocolName[0] == UInt8(ascii: "h") && protocolName[1] == UInt8(ascii: "2")
    }

    /// The client's certificate, as a server sees it.
    public func peerCertificate(requested: Bool) -> TLSPeerCertificate {
        guard requested, let peer = SSL_get0_peer_certificate(ssl) else { return .none }
        guard SSL_get_verify_result(ssl) == Int(X509_V_OK) else { return .untrusted }
        var buffer = [CChar](repeating: 0, count: 256)
        let length = X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_userId, &buffer, Int32(buffer.count))
        guard length > 0 else { return .trusted(userID: nil) }
        return .trusted(userID: String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    // MARK: Closing

    /// Sends `close_notify` (errors ignored: the peer may be gone).
    public func sendCloseNotify() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// Sends `close_notify` and shuts the socket's write side, keeping it open for reading.
    public func shutdownWrite() {
        sendCloseNotify()
        shutdown(fd, Int32(SHUT_WR))
    }

    /// Reads and discards raw socket input (after ``shutdownWrite()``). False once the peer closed or
    /// the socket failed.
    public func discardInput(using buffer: UnsafeMutableRawBufferPointer, maximumReads: Int) -> Bool {
        for _ in 0..<maximumReads {
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count > 0 { continue }
            return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        }
        return true
    }

    /// Closes the socket; `abort` resets the connection (RST, nothing more written).
    public func close(abort: Bool = false) {
        guard !isClosed else { return }
        if abort {
            var option = linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        }
        Glibc.close(fd)
        isClosed = true
    }
}
