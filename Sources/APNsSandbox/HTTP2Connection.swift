import APNs
import CNghttp2
import COpenSSL
import Glibc
import Logging

/// One client connection: its socket, its `SSL` and its nghttp2 server session, all owned and freed
/// here, driven by the worker thread that accepted it (never touched by another thread).
///
/// Input: `SSL_read` → `nghttp2_session_mem_recv`, whose callbacks collect each stream's request and
/// answer it when complete. Output: `nghttp2_session_mem_send` → one buffer → `SSL_write`, after the
/// worker recorded the pass's deliveries. A would-block (`WANT_READ`/`WANT_WRITE`) leaves the rest for
/// the next poll wake-up.
final class HTTP2Connection {
    enum Phase: Equatable {
        case handshaking
        case open
        /// Sent everything and TLS close_notify, write side shut; reading (and discarding) until the
        /// client closes or `deadline` (monotonic ms), so unread input cannot make the kernel reset
        /// the connection before the client read the last answers.
        case lingering(deadline: UInt64)
        case closed
    }

    /// A stream's request as it arrives, then its answer.
    private final class Stream {
        var method = ""
        var path = ""
        var headers: [PushRequest.Field] = []
        var body: [UInt8] = []
        var bodyLength = 0
        var response: [UInt8] = []
        var responseOffset = 0
        var delayedAnswer: PushAnswer?

        var request: PushRequest {
            PushRequest(method: method, path: path, headers: headers, body: body, bodyLength: bodyLength)
        }
    }

    /// SSL_read calls per wake-up before other connections get a turn.
    static let readsPerPass = 64
    /// Output gathered from nghttp2 before it is written.
    static let writeChunk = 64 * 1024
    /// SSL_write calls per flush before other connections get a turn.
    static let writesPerPass = 64
    /// How long a closing connection waits for the client to close.
    static let lingerMilliseconds: UInt64 = 2000
    /// The connection flow-control window: room for 1000 streams' payloads in flight.
    static let connectionWindow: Int32 = 16 * 1024 * 1024
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (CONTRACT.md).
    static let maximumConcurrentStreams: UInt32 = 1000

    let id: UInt64
    let fd: Int32
    private let ssl: OpaquePointer
    private var session: OpaquePointer?
    private unowned let worker: WorkerContext
    private(set) var phase = Phase.handshaking
    private var authentication = ConnectionAuthentication.none
    private var streams: [Int32: Stream] = [:]
    private var outbound: [UInt8] = []
    private var outboundOffset = 0
    /// A TLS write (or handshake step) waits for room in the socket: poll for POLLOUT.
    private(set) var wantsWritable = false
    /// Queued in the worker's flush list this pass.
    var isQueuedForFlush = false
    /// Queued in the worker's list of connections to serve again without waiting for poll.
    var isQueuedForService = false
    private var streamsBegun = 0
    private var requestsCompleted = 0
    private var lastBegunStreamID: Int32 = 0
    /// Set once GOAWAY was submitted: streams above it are refused, never processed.
    private var goawayLastStreamID: Int32?
    private var dropRequested = false

    /// Takes ownership of `fd` (non-blocking, connected).
    init(fd: Int32, id: UInt64, worker: WorkerContext) throws(SandboxError) {
        guard let ssl = SSL_new(worker.tls.pointer) else {
            close(fd)
            throw SandboxError.openSSL(.tls, "SSL_new failed")
        }
        self.ssl = ssl
        self.fd = fd
        self.id = id
        self.worker = worker
        SSL_set_accept_state(ssl)
        guard SSL_set_fd(ssl, fd) == 1 else {
            // deinit frees the SSL and closes fd.
            throw SandboxError.openSSL(.tls, "SSL_set_fd failed")
        }
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        SSL_free(ssl)
        if phase != .closed { close(fd) }
    }

    static func from(_ userData: UnsafeMutableRawPointer) -> HTTP2Connection {
        Unmanaged<HTTP2Connection>.fromOpaque(userData).takeUnretainedValue()
    }

    var isClosed: Bool { phase == .closed }

    var lingerDeadline: UInt64? {
        if case .lingering(let deadline) = phase { return deadline }
        return nil
    }

    // MARK: Events from the worker

    /// poll said the socket is readable, writable or failed.
    func handle(readable: Bool, writable: Bool, failed: Bool) {
        switch phase {
        case .handshaking:
            continueHandshake()
        case .open:
            if readable || failed { readAvailable() }
            // Output waiting on the socket (or on TLS reading first) is retried on any event.
            if writable || outboundOffset < outbound.count { worker.queueFlush(self) }
        case .lingering:
            discardInput()
        case .closed:
            break
        }
    }

    /// Served again without a poll wake-up (a pass stopped at its bound).
    func service() {
        guard phase == .open else { return }
        readAvailable()
        worker.queueFlush(self)
    }

    /// Graceful shutdown: GOAWAY naming the last stream begun; the connection closes once those are
    /// answered. A connection still in its handshake closes at once.
    func goAway() {
        switch phase {
        case .handshaking:
            closeNow()
        case .open:
            submitGoaway(lastStreamID: lastBegunStreamID)
            worker.queueFlush(self)
        case .lingering, .closed:
            break
        }
    }

    /// Closes at once (shutdown deadline passed, linger deadline passed).
    func closeNow() {
        guard phase != .closed else { return }
        releaseSession()
        close(fd)
        phase = .closed
    }

    // MARK: TLS

    private func continueHandshake() {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            established()
            return
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ:
            wantsWritable = false
        case SSL_ERROR_WANT_WRITE:
            wantsWritable = true
        default:
            let details = SandboxError.openSSLErrorQueue()
            worker.logger.debug("TLS handshake failed", metadata: ["sandbox.connection": "\(id)", "tls.error": "\(details)"])
            closeNow()
        }
    }

    private func established() {
        var protocolName: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &protocolName, &length)
        guard let protocolName, length == 2, protocolName[0] == UInt8(ascii: "h"), protocolName[1] == UInt8(ascii: "2") else {
            // The ALPN callback refuses clients that offer other protocols; this one offered none.
            worker.logger.debug("closing a TLS connection that did not negotiate h2", metadata: ["sandbox.connection": "\(id)"])
            closeNow()
            return
        }
        authentication = clientCertificateAuthentication()
        do {
            try startSession()
        } catch {
            worker.logger.error("cannot start an HTTP/2 session", metadata: ["sandbox.error": "\(error)"])
            closeNow()
            return
        }
        phase = .open
        wantsWritable = false
        worker.batch.connections += 1
        worker.queueFlush(self)
        readAvailable()
    }

    private func clientCertificateAuthentication() -> ConnectionAuthentication {
        guard worker.tls.requestsClientCertificates, let peer = SSL_get0_peer_certificate(ssl) else { return .none }
        guard SSL_get_verify_result(ssl) == Int(X509_V_OK) else { return .untrustedCertificate }
        var buffer = [CChar](repeating: 0, count: 256)
        let length = X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_userId, &buffer, Int32(buffer.count))
        guard length > 0 else { return .certificate(topic: nil) }
        return .certificate(topic: String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    private func startSession() throws(SandboxError) {
        var session: OpaquePointer?
        let userData = Unmanaged.passUnretained(self).toOpaque()
        let created = nghttp2_session_server_new2(&session, worker.callbacks.callbacks, userData, worker.callbacks.options)
        guard created == 0, let session else { throw SandboxError.nghttp2("nghttp2_session_server_new2", created) }
        self.session = session
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: Self.maximumConcurrentStreams)
        ]
        let submitted = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        guard submitted == 0 else { throw SandboxError.nghttp2("nghttp2_submit_settings", submitted) }
        let widened = nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Self.connectionWindow)
        guard widened == 0 else { throw SandboxError.nghttp2("nghttp2_session_set_local_window_size", widened) }
    }

    private func releaseSession() {
        if let session {
            nghttp2_session_del(session)
            self.session = nil
        }
        streams.removeAll()
    }

    // MARK: Input

    private func readAvailable() {
        guard phase == .open, let session else { return }
        let buffer = worker.readBuffer
        for _ in 0..<Self.readsPerPass {
            ERR_clear_error()
            let count = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
            if count > 0 {
                let consumed = nghttp2_session_mem_recv(session, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int(count))
                if dropRequested {
                    drop()
                    return
                }
                if consumed < 0 {
                    worker.logger.debug(
                        "closing a connection after an HTTP/2 error",
                        metadata: ["sandbox.connection": "\(id)", "http2.error": "\(String(cString: nghttp2_strerror(Int32(consumed))))"]
                    )
                    closeNow()
                    return
                }
                worker.queueFlush(self)
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ:
                return
            case SSL_ERROR_WANT_WRITE:
                wantsWritable = true
                return
            default:
                // close_notify, EOF or a reset: the client is gone, nothing more can be answered.
                ERR_clear_error()
                closeNow()
                return
            }
        }
        worker.queueService(self)
    }

    private func discardInput() {
        let buffer = worker.readBuffer
        for _ in 0..<Self.readsPerPass {
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count > 0 { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            closeNow()
            return
        }
    }

    // MARK: Output

    /// Moves nghttp2's output through TLS until done or the socket is full.
    func flush() {
        guard phase == .open, let session else { return }
        for _ in 0..<Self.writesPerPass {
            if outboundOffset < outbound.count {
                ERR_clear_error()
                let written = outbound.withUnsafeBufferPointer { bytes in
                    SSL_write(ssl, bytes.baseAddress! + outboundOffset, Int32(bytes.count - outboundOffset))
                }
                if written > 0 {
                    outboundOffset += Int(written)
                    if outboundOffset == outbound.count {
                        outbound.removeAll(keepingCapacity: true)
                        outboundOffset = 0
                    }
                    continue
                }
                switch SSL_get_error(ssl, written) {
                case SSL_ERROR_WANT_WRITE:
                    wantsWritable = true
                case SSL_ERROR_WANT_READ:
                    wantsWritable = false
                default:
                    ERR_clear_error()
                    closeNow()
                }
                return
            }
            wantsWritable = false
            var produced = false
            while outbound.count < Self.writeChunk {
                var data: UnsafePointer<UInt8>?
                let length = nghttp2_session_mem_send(session, &data)
                if length < 0 {
                    worker.logger.debug("closing a connection after an HTTP/2 error", metadata: ["sandbox.connection": "\(id)"])
                    closeNow()
                    return
                }
                guard length > 0, let data else { break }
                outbound.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
                produced = true
            }
            if !produced {
                closeIfFinished()
                return
            }
        }
        worker.queueService(self)
    }

    /// After GOAWAY (or when nghttp2 is done with the session) and with every answer written, the
    /// connection closes gracefully.
    private func closeIfFinished() {
        guard phase == .open, let session, outboundOffset == outbound.count, nghttp2_session_want_write(session) == 0 else { return }
        let sessionDone = nghttp2_session_want_read(session) == 0
        let wentAway = goawayLastStreamID != nil && streams.isEmpty
        guard sessionDone || wentAway else { return }
        releaseSession()
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
        shutdown(fd, Int32(SHUT_WR))
        wantsWritable = false
        phase = .lingering(deadline: worker.monotonicMilliseconds + Self.lingerMilliseconds)
    }

    /// The `drop_every` fault: a TCP reset, nothing more written.
    private func drop() {
        var abort = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
        closeNow()
    }

    private func submitGoaway(lastStreamID: Int32) {
        guard goawayLastStreamID == nil, let session else { return }
        goawayLastStreamID = lastStreamID
        for streamID in streams.keys where streamID > lastStreamID {
            refuse(streamID)
        }
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, NGHTTP2_NO_ERROR.rawValue, nil, 0)
    }

    private func refuse(_ streamID: Int32) {
        guard let session else { return }
        streams[streamID] = nil
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_REFUSED_STREAM.rawValue)
    }

    // MARK: nghttp2 callbacks

    func beginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST,
            !dropRequested
        else { return 0 }
        let streamID = frame.pointee.hd.stream_id
        if let last = goawayLastStreamID, streamID > last {
            refuse(streamID)
            return 0
        }
        lastBegunStreamID = streamID
        streamsBegun += 1
        streams[streamID] = Stream()
        if let every = worker.rules.faults.goawayEvery, streamsBegun >= every {
            submitGoaway(lastStreamID: streamID)
            worker.batch.goaways += 1
        }
        return 0
    }

    func header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard let stream = streams[streamID] else { return 0 }
        if name.first == UInt8(ascii: ":") {
            if name.elementsEqual(":method".utf8) {
                stream.method = String(decoding: value, as: UTF8.self)
            } else if name.elementsEqual(":path".utf8) {
                stream.path = String(decoding: value, as: UTF8.self)
            }
            return 0
        }
        stream.headers.append(PushRequest.Field(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        return 0
    }

    func data(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard let stream = streams[streamID] else { return 0 }
        stream.bodyLength += bytes.count
        let room = PushRequest.maximumKeptBody - stream.body.count
        if room > 0 { stream.body.append(contentsOf: bytes.prefix(room)) }
        return 0
    }

    func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let type = frame.pointee.hd.type
        guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue),
            frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
            !dropRequested
        else { return 0 }
        let streamID = frame.pointee.hd.stream_id
        guard let stream = streams[streamID] else { return 0 }
        requestsCompleted += 1
        if let every = worker.rules.faults.dropEvery, requestsCompleted >= every {
            dropRequested = true
            worker.batch.droppedConnections += 1
            return 0
        }
        let answer = worker.answer(stream.request, authentication: authentication)
        if let delay = worker.rules.faults.delayMilliseconds, delay > 0 {
            stream.delayedAnswer = answer
            worker.schedule(DelayedAnswer(connectionID: id, streamID: streamID), afterMilliseconds: UInt64(delay))
        } else {
            submit(answer, to: stream, streamID: streamID)
        }
        return 0
    }

    func streamClosed(_ streamID: Int32) -> Int32 {
        streams[streamID] = nil
        return 0
    }

    func readResponseBody(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let stream = streams[streamID] else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let count = min(buffer.count, stream.response.count - stream.responseOffset)
        stream.response.withUnsafeBufferPointer { source in
            buffer.baseAddress!.update(from: source.baseAddress! + stream.responseOffset, count: count)
        }
        stream.responseOffset += count
        if stream.responseOffset == stream.response.count {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        }
        return count
    }

    // MARK: Answers

    /// A `delay_ms` timer fired for `streamID`.
    func sendDelayedAnswer(streamID: Int32) {
        guard phase == .open, let stream = streams[streamID], let answer = stream.delayedAnswer else { return }
        stream.delayedAnswer = nil
        submit(answer, to: stream, streamID: streamID)
    }

    private func submit(_ answer: PushAnswer, to stream: Stream, streamID: Int32) {
        guard let session else { return }
        stream.response = answer.body
        stream.responseOffset = 0
        var text: [UInt8] = []
        var fields: [(name: Range<Int>, value: Range<Int>)] = []
        func add(_ name: String, _ value: String) {
            let nameStart = text.count
            text.append(contentsOf: name.utf8)
            let valueStart = text.count
            text.append(contentsOf: value.utf8)
            fields.append((nameStart..<valueStart, valueStart..<text.count))
        }
        add(":status", String(answer.status))
        add("apns-id", answer.apnsID)
        if let uniqueID = answer.uniqueID { add("apns-unique-id", uniqueID) }
        if !answer.body.isEmpty { add("content-type", "application/json") }
        let result = text.withUnsafeMutableBufferPointer { bytes -> Int32 in
            let base = bytes.baseAddress!
            var nameValues = fields.map { field in
                nghttp2_nv(
                    name: base + field.name.lowerBound, value: base + field.value.lowerBound,
                    namelen: field.name.count, valuelen: field.value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
                )
            }
            if answer.body.isEmpty {
                return nghttp2_submit_response(session, streamID, &nameValues, nameValues.count, nil)
            }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2Callbacks.readBody)
            return nghttp2_submit_response(session, streamID, &nameValues, nameValues.count, &provider)
        }
        if result != 0 {
            worker.logger.debug("cannot answer a stream", metadata: ["sandbox.stream": "\(streamID)", "http2.error": "\(String(cString: nghttp2_strerror(result)))"])
        }
        worker.queueFlush(self)
    }
}
