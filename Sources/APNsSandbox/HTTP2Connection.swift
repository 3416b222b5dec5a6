import APNs
import Glibc
import HTTP2Transport
import Logging

/// One client connection: its TLS stream (socket and `SSL`) and, once the handshake is done (ALPN
/// `h2`, or no ALPN: ``ConnectionProtocol``), its HTTP/2 server session (``HTTP2OverTLS``), all
/// owned and freed here, driven by the worker thread that accepted it (never touched by another
/// thread).
///
/// Input: TLS → the session, whose events (``HTTP2SessionDelegate``) collect each stream's request
/// and answer it when complete. Output: the session → TLS, after the worker recorded the pass's
/// deliveries. A would-block leaves the rest for the next poll wake-up.
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
        /// The answer accepts a notification (counted in the connection's ``AnswerLedger``).
        var accepted = false

        var request: PushRequest {
            PushRequest(method: method, path: path, headers: headers, body: body, bodyLength: bodyLength)
        }
    }

    /// TLS reads per wake-up before other connections get a turn.
    static let readsPerPass = 64
    /// TLS writes per flush before other connections get a turn.
    static let writesPerPass = 64
    /// How long a closing connection waits for the client to close.
    static let lingerMilliseconds: UInt64 = 2000
    /// The connection flow-control window: room for 1000 streams' payloads in flight.
    static let connectionWindow: Int32 = 16 * 1024 * 1024
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (CONTRACT.md).
    static let maximumConcurrentStreams: UInt32 = 1000

    let id: UInt64
    private let tls: TLSStream
    private var transport: HTTP2OverTLS?
    private unowned let worker: WorkerContext
    private(set) var phase = Phase.handshaking
    private var authentication = ConnectionAuthentication.none
    /// The key and `iat` of the provider tokens this connection carried.
    private var tokens = ConnectionTokens()
    private var streams: [Int32: Stream] = [:]
    /// The handshake waits for room in the socket.
    private var handshakeWantsWritable = false
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
    /// The client sent GOAWAY: it is leaving on purpose, so its end loses nothing.
    private var clientWentAway = false
    /// Accepted answers the client may not have had, for `lost_answers`.
    private var ledger: AnswerLedger
    /// When a stream last began (or the connection was taken), monotonic ms: for the idle timeout.
    private var lastActiveAt: UInt64

    /// The API the listener it came in on serves.
    let role: ListenerRole

    /// Takes ownership of `fd` (non-blocking, connected).
    init(fd: Int32, id: UInt64, role: ListenerRole = .combined, worker: WorkerContext) throws(SandboxError) {
        self.role = role
        do {
            tls = try TLSStream(context: worker.tls, fd: fd, role: .server)
        } catch {
            throw SandboxError(error)
        }
        self.id = id
        self.worker = worker
        lastActiveAt = worker.monotonicMilliseconds
        ledger = AnswerLedger(confirmsWithPing: worker.confirmsAnswers)
    }

    /// Open, with nothing in flight and no stream begun for `timeout` ms at `now`.
    func isIdle(now: UInt64, timeout: UInt64) -> Bool {
        phase == .open && streams.isEmpty && goawayLastStreamID == nil && now >= lastActiveAt + timeout
    }

    var fd: Int32 { tls.fd }

    /// Poll for `POLLOUT`: a TLS write (or handshake step) waits for room in the socket.
    var wantsWritable: Bool { transport?.wantsWritable ?? handshakeWantsWritable }

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
            if writable || transport?.hasUnwrittenOutput == true { worker.queueFlush(self) }
        case .lingering:
            if !tls.discardInput(using: worker.readBuffer, maximumReads: Self.readsPerPass) { closeNow() }
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

    /// Graceful close: GOAWAY naming the last stream begun and `reason` (`Shutdown` for the server
    /// going down, `IdleTimeout` for an idle connection, as APNs says them); the connection closes once
    /// those are answered. A connection still in its handshake closes at once.
    func goAway(reason: APNsReason = .shutdown) {
        switch phase {
        case .handshaking:
            closeNow()
        case .open:
            submitGoaway(lastStreamID: lastBegunStreamID, reason: reason)
            worker.queueFlush(self)
        case .lingering, .closed:
            break
        }
    }

    /// Closes at once (shutdown deadline passed, linger deadline passed).
    func closeNow() {
        guard phase != .closed else { return }
        if phase == .open { end() }
        releaseSession()
        tls.close()
        phase = .closed
    }

    // MARK: TLS

    private func continueHandshake() {
        switch tls.handshakeStep() {
        case .done:
            established()
        case .wantRead:
            handshakeWantsWritable = false
        case .wantWrite:
            handshakeWantsWritable = true
        case .closed:
            closeNow()
        case .failed(let details):
            worker.logger.debug("TLS handshake failed", metadata: ["sandbox.connection": "\(id)", "tls.error": "\(details)"])
            closeNow()
        }
    }

    private func established() {
        if ConnectionProtocol(negotiatedHTTP2: tls.negotiatedHTTP2) == .priorKnowledge {
            worker.logger.debug("a TLS client without ALPN: HTTP/2 with prior knowledge", metadata: ["sandbox.connection": "\(id)"])
        }
        switch tls.peerCertificate(requested: worker.tls.requestsClientCertificates) {
        case .none: authentication = .none
        case .untrusted: authentication = .untrustedCertificate
        case .trusted(let userID): authentication = .certificate(topic: userID)
        }
        do {
            let session = try HTTP2Session(
                role: .server, delegate: self, settings: [.maximumConcurrentStreams(Self.maximumConcurrentStreams)],
                connectionWindow: Self.connectionWindow
            )
            transport = HTTP2OverTLS(tls: tls, session: session)
        } catch {
            worker.logger.error("cannot start an HTTP/2 session", metadata: ["sandbox.error": "\(SandboxError(error))"])
            closeNow()
            return
        }
        phase = .open
        handshakeWantsWritable = false
        worker.batch.connections += 1
        worker.queueFlush(self)
        readAvailable()
    }

    private func releaseSession() {
        transport = nil
        streams.removeAll()
    }

    // MARK: Input

    private func readAvailable() {
        guard phase == .open, let transport else { return }
        let outcome = transport.readAvailable(into: worker.readBuffer, maximumReads: Self.readsPerPass) {
            if dropRequested { return true }
            worker.queueFlush(self)
            return false
        }
        if dropRequested {
            drop()
            return
        }
        switch outcome {
        case .drained, .stopped:
            break
        case .bounded:
            worker.queueService(self)
        case .protocolError(let code):
            worker.logger.debug(
                "closing a connection after an HTTP/2 error",
                metadata: ["sandbox.connection": "\(id)", "http2.error": "\(http2ErrorText(code))"]
            )
            closeNow()
        case .closed, .failed:
            // close_notify, EOF or a reset: the client is gone, nothing more can be answered.
            closeNow()
        }
    }

    // MARK: Output

    /// Moves the session's output through TLS until done or the socket is full.
    func flush() {
        guard phase == .open, let transport else { return }
        switch transport.flush(maximumWrites: Self.writesPerPass) {
        case .finished:
            if ledger.outputFlushed() {
                transport.session.ping()
                worker.queueFlush(self)
                return
            }
            closeIfFinished()
        case .blocked:
            break
        case .bounded:
            worker.queueService(self)
        case .failed:
            closeNow()
        case .protocolError:
            worker.logger.debug("closing a connection after an HTTP/2 error", metadata: ["sandbox.connection": "\(id)"])
            closeNow()
        }
    }

    /// After GOAWAY (or when nghttp2 is done with the session) and with every answer written, the
    /// connection closes gracefully.
    private func closeIfFinished() {
        guard phase == .open, let transport, !transport.hasUnwrittenOutput, !transport.session.wantsWrite else { return }
        let sessionDone = !transport.session.wantsRead
        let wentAway = goawayLastStreamID != nil && streams.isEmpty
        guard sessionDone || wentAway else { return }
        releaseSession()
        tls.shutdownWrite()
        handshakeWantsWritable = false
        phase = .lingering(deadline: worker.monotonicMilliseconds + Self.lingerMilliseconds)
    }

    /// The `drop_every` fault: a TCP reset, nothing more written.
    private func drop() {
        end()
        releaseSession()
        tls.close(abort: true)
        phase = .closed
    }

    /// The open connection ends at once (a reset or EOF, the `drop_every` fault, a protocol error, a
    /// shutdown deadline): accepted answers the client may not have had count as lost, and without a
    /// GOAWAY from the client the connection counts as aborted.
    private func end() {
        if !clientWentAway || dropRequested { worker.batch.abortedConnections += 1 }
        worker.batch.lostAnswers += ledger.end(clientSaidGoodbye: clientWentAway && !dropRequested)
    }

    /// GOAWAY with `reason` as APNs writes it in the debug data (`{"reason":"Shutdown"}`), or none.
    private func submitGoaway(lastStreamID: Int32, reason: APNsReason?) {
        guard goawayLastStreamID == nil, let session = transport?.session else { return }
        goawayLastStreamID = lastStreamID
        for streamID in streams.keys where streamID > lastStreamID {
            refuse(streamID)
        }
        session.goAway(lastStreamID: lastStreamID, debugData: reason.map { #"{"reason":"\#($0.rawValue)"}"# } ?? "")
    }

    private func refuse(_ streamID: Int32) {
        streams[streamID] = nil
        transport?.session.resetStream(streamID, errorCode: HTTP2ErrorCode.refusedStream)
    }

    // MARK: Answers

    /// A `delay_ms` timer fired for `streamID`.
    func sendDelayedAnswer(streamID: Int32) {
        guard phase == .open, let stream = streams[streamID], let answer = stream.delayedAnswer else { return }
        stream.delayedAnswer = nil
        submit(answer, to: stream, streamID: streamID)
    }

    private func submit(_ answer: PushAnswer, to stream: Stream, streamID: Int32) {
        guard let session = transport?.session else { return }
        stream.response = answer.body
        stream.responseOffset = 0
        var headers = HTTP2HeaderBlock(bytes: 128, fields: 5)
        headers.add(":status", String(answer.status))
        headers.add(answer.idHeader, answer.apnsID)
        if let uniqueID = answer.uniqueID { headers.add("apns-unique-id", uniqueID) }
        if let channelID = answer.channelID { headers.add("apns-channel-id", channelID) }
        if !answer.body.isEmpty { headers.add("content-type", "application/json") }
        if let error = session.submitResponse(streamID: streamID, &headers, hasBody: !answer.body.isEmpty) {
            worker.logger.debug("cannot answer a stream", metadata: ["sandbox.stream": "\(streamID)", "http2.error": "\(http2ErrorText(error))"])
        }
        worker.queueFlush(self)
    }
}

// MARK: nghttp2's events

extension HTTP2Connection: HTTP2SessionDelegate {
    func http2RequestBegan(streamID: Int32) {
        guard !dropRequested else { return }
        if let last = goawayLastStreamID, streamID > last {
            refuse(streamID)
            return
        }
        lastBegunStreamID = streamID
        lastActiveAt = worker.monotonicMilliseconds
        streamsBegun += 1
        streams[streamID] = Stream()
        if let every = worker.rules.faults.goawayEvery, streamsBegun >= every {
            submitGoaway(lastStreamID: streamID, reason: worker.rules.faults.goawayReason)
            worker.batch.goaways += 1
        }
    }

    func http2Header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let stream = streams[streamID] else { return }
        if name.first == UInt8(ascii: ":") {
            if name.elementsEqual(":method".utf8) {
                stream.method = String(decoding: value, as: UTF8.self)
            } else if name.elementsEqual(":path".utf8) {
                stream.path = String(decoding: value, as: UTF8.self)
            }
            return
        }
        stream.headers.append(PushRequest.Field(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
    }

    func http2Data(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let stream = streams[streamID] else { return }
        stream.bodyLength += bytes.count
        let room = PushRequest.maximumKeptBody - stream.body.count
        if room > 0 { stream.body.append(contentsOf: bytes.prefix(room)) }
    }

    func http2FrameReceived(_ frame: HTTP2Frame) {
        let streamID: Int32
        switch frame {
        case .headers(let id, endStream: true), .data(let id, endStream: true): streamID = id
        case .ping(ack: true):
            if ledger.pingAcknowledged() {
                transport?.session.ping()
                worker.queueFlush(self)
            }
            return
        case .goaway:
            clientWentAway = true
            return
        default: return
        }
        guard !dropRequested, let stream = streams[streamID] else { return }
        requestsCompleted += 1
        if let every = worker.rules.faults.dropEvery, requestsCompleted >= every {
            dropRequested = true
            worker.batch.droppedConnections += 1
            return
        }
        let answer = worker.answer(stream.request, authentication: authentication, tokens: &tokens, role: role)
        if answer.acceptsNotification {
            stream.accepted = true
            ledger.accepted()
        }
        if let delay = worker.rules.faults.delayMilliseconds, delay > 0 {
            stream.delayedAnswer = answer
            worker.schedule(DelayedAnswer(connectionID: id, streamID: streamID), afterMilliseconds: UInt64(delay))
        } else {
            submit(answer, to: stream, streamID: streamID)
        }
    }

    func http2StreamClosed(streamID: Int32, errorCode: UInt32) {
        if let stream = streams.removeValue(forKey: streamID), stream.accepted {
            // Closed without error only once the answer's last frame went out; a reset (the client
            // gave up waiting) loses it.
            worker.batch.lostAnswers += ledger.acceptedStreamClosed(answerSent: errorCode == HTTP2ErrorCode.noError)
        }
    }

    func http2Body(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) -> (count: Int, finished: Bool) {
        guard let stream = streams[streamID] else { return (0, true) }
        let count = min(buffer.count, stream.response.count - stream.responseOffset)
        stream.response.withUnsafeBufferPointer { source in
            buffer.baseAddress!.update(from: source.baseAddress! + stream.responseOffset, count: count)
        }
        stream.responseOffset += count
        return (count, stream.responseOffset == stream.response.count)
    }
}
