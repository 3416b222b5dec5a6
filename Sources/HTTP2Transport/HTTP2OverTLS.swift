/// One HTTP/2 session carried over one TLS stream: what comes in through TLS feeds the session, what
/// the session produces goes out through TLS. The read loop and the flush loop live here once, for
/// the APNs client and apns-sandbox alike; the owner decides what a would-block or a failure means.
public final class HTTP2OverTLS {
    public let tls: TLSStream
    public let session: HTTP2Session
    private var outbound: [UInt8] = []
    private var outboundOffset = 0
    /// A write waits for room in the socket: poll for `POLLOUT`.
    public private(set) var wantsWritable = false

    /// Output gathered from nghttp2 before it is written through TLS.
    public static let writeChunk = 64 * 1024

    public init(tls: TLSStream, session: HTTP2Session) {
        self.tls = tls
        self.session = session
        outbound.reserveCapacity(Self.writeChunk)
    }

    /// Output nghttp2 produced that TLS has not taken yet.
    public var hasUnwrittenOutput: Bool { outboundOffset < outbound.count }

    // MARK: Reading

    public enum ReadOutcome: Equatable {
        /// Everything available was read (TLS would block).
        case drained
        /// `maximumReads` reads happened; more may be waiting.
        case bounded
        /// The owner asked to stop after a read.
        case stopped
        /// The peer closed TLS cleanly.
        case closed
        /// TLS or the socket failed (OpenSSL's error queue, may be empty).
        case failed(details: String)
        /// The peer broke HTTP/2 (nghttp2's error code).
        case protocolError(Int)
    }

    /// Reads and feeds the session until TLS would block, `maximumReads` reads happened, or
    /// `stopAfterRead` (called after each read's callbacks ran) says stop.
    @inline(__always)
    public func readAvailable(
        into buffer: UnsafeMutableRawBufferPointer, maximumReads: Int, stopAfterRead: () -> Bool
    ) -> ReadOutcome {
        for _ in 0..<maximumReads {
            switch tls.read(into: buffer) {
            case .done(let count):
                if let error = session.receive(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
                    return .protocolError(error)
                }
                if stopAfterRead() { return .stopped }
            case .wantRead:
                return .drained
            case .wantWrite:
                wantsWritable = true
                return .drained
            case .closed:
                return .closed
            case .failed(let details):
                return .failed(details: details)
            }
        }
        return .bounded
    }

    // MARK: Writing

    public enum FlushOutcome: Equatable {
        /// Everything nghttp2 had was written.
        case finished
        /// The socket is full (``wantsWritable``) or TLS must read first; the rest waits.
        case blocked
        /// `maximumWrites` writes happened; more may be waiting.
        case bounded
        /// Writing failed (OpenSSL's error queue, may be empty).
        case failed(details: String)
        /// nghttp2 failed to produce output (its error code).
        case protocolError(Int)
    }

    /// Moves nghttp2's output through TLS until done, the socket is full, or `maximumWrites` writes.
    public func flush(maximumWrites: Int = .max) -> FlushOutcome {
        var writes = 0
        while writes < maximumWrites {
            if outboundOffset < outbound.count {
                writes += 1
                let result = outbound.withUnsafeBytes { bytes in
                    tls.write(UnsafeRawBufferPointer(rebasing: bytes[outboundOffset...]))
                }
                switch result {
                case .done(let written):
                    outboundOffset += written
                    if outboundOffset == outbound.count {
                        outbound.removeAll(keepingCapacity: true)
                        outboundOffset = 0
                    }
                    continue
                case .wantWrite:
                    wantsWritable = true
                    return .blocked
                case .wantRead:
                    wantsWritable = false
                    return .blocked
                case .closed:
                    return .failed(details: "the peer closed TLS")
                case .failed(let details):
                    return .failed(details: details)
                }
            }
            wantsWritable = false
            var produced = false
            while outbound.count < Self.writeChunk {
                let (bytes, error) = session.nextOutput()
                if let error { return .protocolError(error) }
                guard !bytes.isEmpty else { break }
                outbound.append(contentsOf: bytes)
                produced = true
            }
            if !produced { return .finished }
        }
        return .bounded
    }
}
