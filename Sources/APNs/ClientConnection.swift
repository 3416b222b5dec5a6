import Foundation
import Glibc
import HTTP2Transport
import IOSupport
import Logging
import Synchronization

/// What a client's connections share: settings, the request queue, TLS, the provider token and the
/// wake-up slots.
final class ClientShared: Sendable {
    let configuration: APNsClientConfiguration
    let queue: RequestQueue
    let tls: TLSContext
    let tokens: ProviderTokenSource?
    let wakeups: ConnectionWakeups
    let logger: Logger
    /// Connections with an HTTP/2 session up now.
    let openConnections = Atomic<Int>(0)
    /// Times a connection was opened (for tests and logs).
    let connectionsOpened = Atomic<Int>(0)

    init(
        configuration: APNsClientConfiguration, queue: RequestQueue, tls: TLSContext, tokens: ProviderTokenSource?,
        wakeups: ConnectionWakeups, logger: Logger
    ) {
        self.configuration = configuration
        self.queue = queue
        self.tls = tls
        self.tokens = tokens
        self.wakeups = wakeups
        self.logger = logger
    }
}

/// One HTTP/2 connection to APNs and the thread that drives it: the driver of a
/// ``ClientConnectionStateMachine``. The socket, TLS and nghttp2 session (``HTTP2OverTLS``) and the
/// state machine belong to that thread alone; other threads reach it only through its ``WakeSlot``
/// and the shared ``RequestQueue``.
///
/// The loop: take requests while the state machine leaves room, write nghttp2's output through TLS,
/// poll the socket and the wake pipe, read, and run the timers (request deadlines, PING keepalive,
/// idle close). What becomes of each stream and when to close or reconnect is the state machine's
/// decision; this class carries the decisions out.
final class ClientConnection: @unchecked Sendable {
    /// A request on a stream of this connection, and its answer as it arrives.
    final class Stream: ClientStream {
        let request: PendingRequest
        /// The `iat` of the provider token the request carried.
        let tokenIssuedAt: Int64?
        var bodyOffset = 0
        var status: Int?
        var apnsID: String?
        var apnsUniqueID: String?
        var apnsRequestID: String?
        var apnsChannelID: String?
        var body: [UInt8] = []
        /// When the stream was opened (monotonic ns).
        let openedAt: UInt64

        init(request: PendingRequest, tokenIssuedAt: Int64?, openedAt: UInt64) {
            self.request = request
            self.tokenIssuedAt = tokenIssuedAt
            self.openedAt = openedAt
        }

        var isAnswered: Bool { status != nil }
    }

    /// Read buffer size and SSL_read calls per pass.
    static let readBufferSize = 64 * 1024
    static let readsPerPass = 64
    /// Never more streams per connection than this, whatever the server allows.
    static let streamCeiling = 1000

    let index: Int
    private let shared: ClientShared
    private let slot: WakeSlot
    private let logger: Logger
    private var thread: IOThread?

    // Thread-confined state.
    private var machine: ClientConnectionStateMachine<Stream>
    private var transport: HTTP2OverTLS?
    /// Why the connection must be dropped (set by callbacks and I/O, acted on by the loop).
    private var failure: APNsClientError?
    /// The last wake-up came through the pipe (someone has work for this connection).
    private var wokenForWork = false
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ClientConnection.readBufferSize, alignment: 16)
    /// The `:authority` of every request, and one header block refilled for each request.
    private let authority: String
    private var headers = HTTP2HeaderBlock(bytes: 1024, fields: 16)
    /// The `iat` of the provider token this connection sent last (a GOAWAY calling it expired retires it).
    private var lastTokenIssuedAt: Int64?

    init(index: Int, shared: ClientShared) {
        self.index = index
        self.shared = shared
        slot = shared.wakeups.slots[index]
        var logger = shared.logger
        logger[metadataKey: "apns.connection"] = "\(index)"
        self.logger = logger
        let configuration = shared.configuration
        authority = configuration.endpoint.authority
        var decisions = ClientConnectionStateMachine<Stream>.Configuration(
            pingTimeout: configuration.connectTimeout.nanoseconds,
            pingInterval: configuration.pingInterval.nanoseconds,
            idleTimeout: configuration.idleTimeout.nanoseconds,
            shutdownGrace: min(configuration.requestTimeout.nanoseconds, 10_000_000_000)
        )
        decisions.streamCeiling = Self.streamCeiling
        decisions.minimumConnectInterval = configuration.minimumConnectInterval.nanoseconds
        machine = ClientConnectionStateMachine(configuration: decisions)
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Starts the I/O thread; it runs until the slot's `stopping` is set and its work is drained.
    func start() {
        thread = IOThread.start(name: "apns-connection-\(index)") { [self] in run() }
    }

    /// Returns once the thread has exited.
    func waitUntilExited() async {
        await thread?.join()
    }

    // MARK: The loop

    private func run() {
        while true {
            let now = monotonicNanoseconds()
            if slot.stopping.load(ordering: .acquiring) {
                switch machine.shutdown(now: now) {
                case .drain:
                    break
                case .exit:
                    return
                case .closeAndExit:
                    finishClosing(
                        machine.closed(now: now, random: Double.random(in: 0...1)),
                        lostBecause: APNsClientError(.connectionLost, "the client shut down before APNs answered"))
                    return
                }
            }
            if transport == nil {
                runDisconnected(now: now)
            } else {
                runConnected(now: now)
            }
        }
    }

    /// No session: connect when woken for work (after the backoff); else sleep until woken. One
    /// request opens one connection (``ConnectionWakeups/wakeOne()`` wakes one sleeper); more open
    /// as callers outrun the open ones.
    private func runDisconnected(now: UInt64) {
        failExpiredQueued(now: now)
        let oldest = shared.queue.oldestEnqueuedAt()
        let hasWork = oldest != nil
        if hasWork, machine.mayConnect(now: now), !slot.stopping.load(ordering: .relaxed) {
            // A woken thread counts itself in; an unwoken one must win the claim (connecting 0 → 1).
            let claimed =
                wokenForWork
                ? (shared.wakeups.connecting.add(1, ordering: .acquiringAndReleasing), true).1 : claimUnwokenConnect(now: now, oldest: oldest!)
            if claimed {
                wokenForWork = false
                connect()
                shared.wakeups.connecting.subtract(1, ordering: .acquiringAndReleasing)
                return
            }
        }
        slot.freeStreams.store(1, ordering: .relaxed)
        slot.sleeping.store(true, ordering: .sequentiallyConsistent)
        if !hasWork, !shared.queue.isEmpty {
            // Work arrived while this thread was awake, so nobody may have woken it: it counts as woken.
            slot.sleeping.store(false, ordering: .relaxed)
            wokenForWork = true
            return
        }
        // Work nobody woken has taken yet is looked at again soon (see claimUnwokenConnect).
        let nextConnectAt = machine.nextConnectAt
        let waitNanoseconds: UInt64 =
            hasWork ? max(nextConnectAt > now ? nextConnectAt - now : 0, Self.unwokenGrace / 2) : 250_000_000
        var descriptors = [pollfd(fd: slot.descriptor, events: Int16(POLLIN), revents: 0)]
        _ = poll(&descriptors, 1, Int32(min(waitNanoseconds / 1_000_000, 250)))
        slot.sleeping.store(false, ordering: .relaxed)
        if descriptors[0].revents != 0 {
            slot.drain()
            wokenForWork = true
        }
    }

    /// How long queued work may wait while every open connection is full before another opens: far
    /// longer than a loopback server takes to free a stream, far shorter than Apple's round trip.
    static let growthWait: UInt64 = 25_000_000

    /// How long queued work may wait for a woken connection before an unwoken one connects.
    static let unwokenGrace: UInt64 = 20_000_000

    /// Liveness when a wake-up missed (work queued while every thread was awake): an unwoken thread
    /// connects for work that has waited past ``unwokenGrace`` while no connection is open or opening.
    private func claimUnwokenConnect(now: UInt64, oldest: UInt64) -> Bool {
        guard now >= oldest &+ Self.unwokenGrace, shared.openConnections.load(ordering: .acquiring) == 0 else { return false }
        return shared.wakeups.connecting.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged
    }

    private func runConnected(now: UInt64) {
        guard let transport else { return }
        if !slot.stopping.load(ordering: .relaxed) {
            startStreams(transport.session, now: now)
        }
        flush()
        if let failure {
            drop(failure)
            return
        }
        if machine.timersDue(now: now) {
            failExpiredQueued(now: now)
            for action in machine.runTimers(now: now, queueIsEmpty: shared.queue.isEmpty) {
                switch action {
                case .reset(let streamID, let stream):
                    transport.session.resetStream(streamID, errorCode: HTTP2ErrorCode.cancel)
                    stream.request.complete(.failure(APNsClientError(.timeout, "APNs did not answer within the request timeout")))
                case .ping:
                    transport.session.ping()
                case .drop(let reason):
                    failure = APNsClientError(.connectionLost, reason)
                }
            }
            if let failure {
                drop(failure)
                return
            }
        }
        if machine.shouldCloseGracefully {
            closeGracefully()
            return
        }

        slot.freeStreams.store(machine.advertisedRoom, ordering: .relaxed)
        let room = machine.room
        if room == 0, machine.settingsReceived, let oldest = shared.queue.oldestEnqueuedAt(), now >= oldest &+ Self.growthWait {
            // Full, and work has waited for a stream long enough that answers come slowly (a far
            // server): another connection opens (one at a time).
            shared.wakeups.openAnother()
        }
        slot.sleeping.store(true, ordering: .sequentiallyConsistent)
        if room > 0, !shared.queue.isEmpty {
            slot.sleeping.store(false, ordering: .relaxed)
            return
        }
        var descriptors = [
            pollfd(fd: transport.tls.fd, events: Int16(POLLIN) | (transport.wantsWritable ? Int16(POLLOUT) : 0), revents: 0),
            pollfd(fd: slot.descriptor, events: Int16(POLLIN), revents: 0),
        ]
        let timeout: Int32 = machine.openStreams == 0 && shared.queue.isEmpty ? 1000 : 100
        let ready = poll(&descriptors, 2, timeout)
        slot.sleeping.store(false, ordering: .relaxed)
        guard ready > 0 else { return }
        if descriptors[1].revents != 0 { slot.drain() }
        if descriptors[0].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
            readAvailable(transport)
            if let failure { drop(failure) }
        }
    }

    // MARK: Requests

    private func startStreams(_ session: HTTP2Session, now: UInt64) {
        let room = machine.room
        guard room > 0 else { return }
        let requests = shared.queue.take(room)
        guard !requests.isEmpty else { return }
        for (offset, request) in requests.enumerated() {
            if request.deadline <= now {
                request.complete(.failure(APNsClientError(.timeout, "no free stream within the request timeout")))
                continue
            }
            if !submit(request, session, now: now) {
                // Stream ids ran out or nghttp2 refused: the rest go back for a new connection.
                requeue(Array(requests[(offset + 1)...]))
                return
            }
        }
    }

    /// Submits one request; false when this session can take no more streams (the request was requeued).
    private func submit(_ request: PendingRequest, _ session: HTTP2Session, now: UInt64) -> Bool {
        var authorization: (value: String, issuedAt: Int64)?
        if let tokens = shared.tokens {
            do {
                authorization = try tokens.authorization()
            } catch {
                request.complete(.failure(error))
                return true
            }
        }
        headers.removeAll()
        switch request.message {
        case .notification(let notification):
            // The hot path: the connection's reused header block, fields written straight as bytes.
            notification.addHeaders(to: &headers, authority: authority, authorization: authorization?.value)
        case .http(let httpRequest):
            for field in httpRequest.headerFields(authority: authority, authorization: authorization?.value) {
                headers.add(field.name, field.value, indexed: !APNsHTTPRequest.unindexedHeaderNames.contains(field.name))
            }
        }
        lastTokenIssuedAt = authorization?.issuedAt ?? lastTokenIssuedAt
        let streamID = session.submitRequest(&headers, hasBody: !request.body.isEmpty)
        guard streamID > 0 else {
            logger.debug("nghttp2 took no more streams", metadata: ["http2.error": "\(http2ErrorText(Int(streamID)))"])
            machine.streamsExhausted()
            requeue([request])
            return false
        }
        machine.opened(
            streamID: streamID, Stream(request: request, tokenIssuedAt: authorization?.issuedAt, openedAt: now), deadline: request.deadline, now: now)
        return true
    }

    /// Puts unprocessed requests back for any connection; those requeued too often fail.
    private func requeue(_ requests: [PendingRequest]) {
        var again: [PendingRequest] = []
        for request in requests where !request.isCompleted {
            if request.noteRequeue() {
                again.append(request)
            } else {
                request.complete(.failure(APNsClientError(.connectionLost, "refused unprocessed \(PendingRequest.maximumRequeues) times")))
            }
        }
        guard !again.isEmpty else { return }
        if shared.queue.requeue(again) {
            shared.wakeups.wakeAll()
        } else {
            for request in again { request.complete(.failure(APNsClientError(.shutdown, "the client is shut down"))) }
        }
    }

    private func failExpiredQueued(now: UInt64) {
        for request in shared.queue.removeExpired(now: now) {
            request.complete(.failure(APNsClientError(.timeout, "no connection to APNs within the request timeout")))
        }
    }

    // MARK: Connecting

    private func connect() {
        let configuration = shared.configuration
        let endpoint = configuration.endpoint
        let deadline = monotonicNanoseconds() + configuration.connectTimeout.nanoseconds
        do throws(TransportError) {
            let fd: Int32
            if let proxy = configuration.proxy {
                fd = try proxy.proxy.openTunnel(to: endpoint.host, port: endpoint.port, deadline: deadline, now: monotonicNanoseconds)
            } else {
                fd = try TCPConnector.connect(host: endpoint.host, port: endpoint.port, deadline: deadline, now: monotonicNanoseconds)
            }
            let tls = try TLSStream(context: shared.tls, fd: fd, role: .client(host: endpoint.host))
            try tls.handshake(host: endpoint.host, deadline: deadline, now: monotonicNanoseconds)
            let session = try HTTP2Session(
                role: .client, delegate: self, settings: [.enablePush(false), .initialWindowSize(1 << 20)]
            )
            transport = HTTP2OverTLS(tls: tls, session: session)
        } catch {
            let error = APNsClientError(error.kind == .http2 ? .protocolError : .connectFailed, error.message)
            let delay = machine.connectFailed(now: monotonicNanoseconds(), random: Double.random(in: 0...1))
            logger.warning(
                "cannot connect to APNs",
                metadata: ["apns.endpoint": "\(endpoint)", "apns.error": "\(error)", "apns.retry_in_ms": "\(delay / 1_000_000)"]
            )
            if shared.openConnections.load(ordering: .relaxed) == 0 {
                // Nobody can send: callers hear now (a retryable error) instead of at their timeout.
                for request in shared.queue.removeAll() { request.complete(.failure(error)) }
            }
            return
        }
        failure = nil
        machine.connected(now: monotonicNanoseconds())
        shared.openConnections.add(1, ordering: .relaxed)
        shared.connectionsOpened.add(1, ordering: .relaxed)
        slot.isOpen.store(true, ordering: .releasing)
        logger.debug("connected to APNs", metadata: ["apns.endpoint": "\(endpoint)"])
    }

    // MARK: Closing

    /// The connection failed: unprocessed streams go back to the queue, the rest fail with `error`;
    /// the next attempt waits for the backoff.
    private func drop(_ error: APNsClientError) {
        logger.info("APNs connection lost", metadata: ["apns.error": "\(error)", "apns.streams": "\(machine.openStreams)"])
        finishClosing(machine.connectionLost(now: monotonicNanoseconds(), random: Double.random(in: 0...1)), lostBecause: error)
    }

    /// GOAWAY'd (or idle, or out of stream ids) with every stream answered: a clean close; the next
    /// request opens a new connection at once.
    private func closeGracefully() {
        if let transport {
            transport.session.terminate()
            flush()
            transport.tls.sendCloseNotify()
        }
        finishClosing(
            machine.closed(now: monotonicNanoseconds(), random: Double.random(in: 0...1)),
            lostBecause: APNsClientError(.connectionLost, "the connection closed"))
    }

    private func finishClosing(_ closing: ClientConnectionStateMachine<Stream>.Closing, lostBecause error: APNsClientError) {
        for stream in closing.lost { stream.request.complete(.failure(error)) }
        if let transport {
            transport.tls.close()
            self.transport = nil
            shared.openConnections.subtract(1, ordering: .relaxed)
            slot.isOpen.store(false, ordering: .releasing)
        }
        failure = nil
        requeue(closing.requeue.map(\.request))
    }

    // MARK: I/O

    private func readAvailable(_ transport: HTTP2OverTLS) {
        let outcome = transport.readAvailable(into: readBuffer, maximumReads: Self.readsPerPass) {
            machine.received(now: monotonicNanoseconds())
            return failure != nil || shouldRefillBeforeReading
        }
        switch outcome {
        case .drained, .bounded, .stopped:
            break
        case .closed:
            failure = APNsClientError(.connectionLost, "APNs closed the connection")
        case .failed(let details):
            failure = APNsClientError(.connectionLost, Self.message("the connection to APNs failed", details))
        case .protocolError(let code):
            failure = APNsClientError(.protocolError, "HTTP/2 error from APNs: \(http2ErrorText(code))")
        }
    }

    /// Whether to stop reading and open streams first: a tenth of the streams the server allows are
    /// free and requests wait for them. Answers arrive in bursts (a TLS record holds a few hundred);
    /// sending the next requests after each record instead of after the whole burst keeps the
    /// server busy while this side reads the rest, instead of each side waiting for the other.
    private var shouldRefillBeforeReading: Bool {
        machine.room >= max(machine.streamLimit / 10, 1) && !shared.queue.isEmpty
    }

    /// Moves nghttp2's output through TLS until done or the socket is full.
    private func flush() {
        guard let transport else { return }
        switch transport.flush() {
        case .finished, .blocked, .bounded:
            break
        case .failed(let details):
            failure = APNsClientError(.connectionLost, Self.message("writing to APNs failed", details))
        case .protocolError(let code):
            failure = APNsClientError(.protocolError, "HTTP/2 error: \(http2ErrorText(code))")
        }
    }

    private static func message(_ what: String, _ details: String) -> String {
        details.isEmpty ? what : "\(what): \(details)"
    }
}

// MARK: nghttp2's events

extension ClientConnection: HTTP2SessionDelegate {
    func http2Header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let stream = machine.stream(streamID) else { return }
        if Self.equal(name, ":status") {
            stream.status = Self.decimal(value)
        } else if Self.equal(name, "apns-id") {
            stream.apnsID = String(decoding: value, as: UTF8.self)
        } else if Self.equal(name, "apns-unique-id") {
            stream.apnsUniqueID = String(decoding: value, as: UTF8.self)
        } else if name.elementsEqual("apns-request-id".utf8) {
            stream.apnsRequestID = String(decoding: value, as: UTF8.self)
        } else if name.elementsEqual("apns-channel-id".utf8) {
            stream.apnsChannelID = String(decoding: value, as: UTF8.self)
        }
    }

    /// Whether a header name is `literal` (a length check and a memcmp, not a walk through `utf8`).
    private static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount && (bytes.isEmpty || memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0)
    }

    /// A `:status` value: 1–9 ASCII digits, else nil (as `Int(String)` read it).
    private static func decimal(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard (1...9).contains(bytes.count) else { return nil }
        var value = 0
        for byte in bytes {
            guard (48...57).contains(byte) else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        return value
    }

    func http2Data(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let stream = machine.stream(streamID), stream.body.count < stream.request.maximumAnswerBody else { return }
        stream.body.append(contentsOf: bytes.prefix(stream.request.maximumAnswerBody - stream.body.count))
    }

    func http2FrameReceived(_ frame: HTTP2Frame) {
        switch frame {
        case .settings(ack: false):
            if let transport { machine.settingsReceived(maximumConcurrentStreams: transport.session.remoteMaximumConcurrentStreams) }
        case .ping(ack: true):
            machine.pingAcknowledged()
        case .goaway(let lastStreamID, let errorCode, let debugData):
            let goaway = APNsGoaway(errorCode: errorCode, debugData: debugData)
            machine.goawayReceived(lastStreamID: lastStreamID, goaway)
            if goaway.retiresProviderToken, let tokens = shared.tokens, let issuedAt = lastTokenIssuedAt {
                // The next connection signs with a new token (unless this one is too young to replace).
                _ = tokens.expired(usedIssuedAt: issuedAt)
            }
            logger.log(
                level: goaway.isError ? .warning : .debug, "APNs sent GOAWAY",
                metadata: [
                    "http2.last_stream_id": "\(lastStreamID)", "http2.error_code": "\(errorCode)",
                    "apns.reason": "\(goaway.reason.map(\.rawValue) ?? "")", "apns.reconnect": "\(goaway.isError ? "after backoff" : "when needed")",
                ]
            )
            shared.configuration.onGoaway?(goaway)
        default:
            break
        }
    }

    func http2FrameSent(_ frame: HTTP2Frame) {
        if case .headers(let streamID, _) = frame { machine.headersSent(streamID: streamID) }
    }

    func http2FrameNotSent(_ frame: HTTP2Frame) {
        if case .headers(let streamID, _) = frame, let stream = machine.headersNotSent(streamID: streamID) {
            requeue([stream.request])
        }
    }

    func http2StreamClosed(streamID: Int32, errorCode: UInt32) {
        switch machine.streamClosed(streamID: streamID, errorCode: errorCode) {
        case .unknown:
            break
        case .requeue(let stream):
            requeue([stream.request])
        case .lost(let stream, let reason):
            stream.request.complete(.failure(APNsClientError(.connectionLost, reason)))
        case .answered(let stream):
            machine.answered(status: stream.status!)
            let answer = APNsAnswer(
                status: stream.status!, apnsID: stream.apnsID, apnsUniqueID: stream.apnsUniqueID, apnsRequestID: stream.apnsRequestID,
                apnsChannelID: stream.apnsChannelID, body: stream.body, roundTrip: .nanoseconds(Int64(monotonicNanoseconds() &- stream.openedAt))
            )
            if answer.status == 403, answer.reason == .expiredProviderToken, let tokens = shared.tokens, let issuedAt = stream.tokenIssuedAt,
                tokens.expired(usedIssuedAt: issuedAt), stream.request.claimFreshTokenResend()
            {
                logger.notice("APNs called the provider token expired; resending with a new one")
                if shared.queue.requeue([stream.request]) {
                    shared.wakeups.wakeAll()
                    return
                }
            }
            stream.request.complete(.success(answer))
        }
    }

    func http2Body(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) -> (count: Int, finished: Bool) {
        guard let stream = machine.stream(streamID) else { return (0, true) }
        let payload = stream.request.body
        let count = min(buffer.count, payload.count - stream.bodyOffset)
        payload.withUnsafeBufferPointer { source in
            buffer.baseAddress!.update(from: source.baseAddress! + stream.bodyOffset, count: count)
        }
        stream.bodyOffset += count
        return (count, stream.bodyOffset == payload.count)
    }
}
