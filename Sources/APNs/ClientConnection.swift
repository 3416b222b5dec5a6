import CNghttp2
import COpenSSL
import Foundation
import Glibc
import Logging
import Synchronization

/// What a client's connections share: settings, the request queue, TLS, the provider token, the
/// nghttp2 callback table and the wake-up slots.
final class ClientShared: Sendable {
    let configuration: APNsClientConfiguration
    let queue: RequestQueue
    let tls: ClientTLSContext
    let tokens: ProviderTokenSource?
    let callbacks: ClientHTTP2Callbacks
    let wakeups: ConnectionWakeups
    let logger: Logger
    /// Connections with an HTTP/2 session up now.
    let openConnections = Atomic<Int>(0)
    /// Times a connection was opened (for tests and logs).
    let connectionsOpened = Atomic<Int>(0)

    init(
        configuration: APNsClientConfiguration, queue: RequestQueue, tls: ClientTLSContext, tokens: ProviderTokenSource?,
        callbacks: ClientHTTP2Callbacks, wakeups: ConnectionWakeups, logger: Logger
    ) {
        self.configuration = configuration
        self.queue = queue
        self.tls = tls
        self.tokens = tokens
        self.callbacks = callbacks
        self.wakeups = wakeups
        self.logger = logger
    }
}

/// One HTTP/2 connection to APNs and the thread that drives it. The socket, `SSL`, nghttp2 session
/// and streams belong to that thread alone; other threads reach it only through its ``WakeSlot``
/// and the shared ``RequestQueue``.
///
/// The loop: take requests while the server's `SETTINGS_MAX_CONCURRENT_STREAMS` leaves room, write
/// nghttp2's output through TLS, poll the socket and the wake pipe, read, and check timers (request
/// deadlines, PING keepalive, idle close) every 100 ms. Streams the server never processed (refused,
/// above a GOAWAY's last stream id, never sent) go back to the queue for another connection; streams
/// lost in flight fail with ``APNsClientError/Code/connectionLost``.
final class ClientConnection: @unchecked Sendable {
    /// A request on a stream of this connection.
    private final class Stream {
        let request: PendingRequest
        /// The `iat` of the provider token the request carried.
        let tokenIssuedAt: Int64?
        var bodyOffset = 0
        /// HEADERS went out: from here on the server may have processed it.
        var sent = false
        var status: Int?
        var apnsID: String?
        var apnsUniqueID: String?
        var body: [UInt8] = []
        /// When the stream was opened (monotonic ns).
        let openedAt = monotonicNanoseconds()

        init(request: PendingRequest, tokenIssuedAt: Int64?) {
            self.request = request
            self.tokenIssuedAt = tokenIssuedAt
        }
    }

    /// Read buffer size and SSL_read calls per pass.
    static let readBufferSize = 64 * 1024
    static let readsPerPass = 64
    /// Output gathered from nghttp2 before it is written.
    static let writeChunk = 64 * 1024
    /// How often timers run (deadlines, PING, idle close).
    static let timerInterval: UInt64 = 100_000_000
    /// Never more streams per connection than this, whatever the server allows.
    static let streamCeiling = 1000

    let index: Int
    private let shared: ClientShared
    private let slot: WakeSlot
    private let logger: Logger
    private let exited = Mutex<(done: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    // Thread-confined state.
    private var fd: Int32 = -1
    private var ssl: OpaquePointer?
    private var session: OpaquePointer?
    private var streams: [Int32: Stream] = [:]
    private var outbound: [UInt8] = []
    private var outboundOffset = 0
    private var wantsWritable = false
    private var settingsReceived = false
    private var goawayLastStreamID: Int32?
    /// Why the session must be dropped (set by callbacks, acted on by the loop).
    private var failure: APNsClientError?
    private var lastReceivedAt: UInt64 = 0
    private var lastActiveAt: UInt64 = 0
    private var pingSentAt: UInt64?
    private var nextTimersAt: UInt64 = 0
    private var failedConnects = 0
    private var nextConnectAt: UInt64 = 0
    private var shutdownDeadline: UInt64?
    /// The last wake-up came through the pipe (someone has work for this connection).
    private var wokenForWork = false
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ClientConnection.readBufferSize, alignment: 16)

    init(index: Int, shared: ClientShared) {
        self.index = index
        self.shared = shared
        slot = shared.wakeups.slots[index]
        var logger = shared.logger
        logger[metadataKey: "apns.connection"] = "\(index)"
        self.logger = logger
    }

    deinit {
        readBuffer.deallocate()
    }

    static func from(_ userData: UnsafeMutableRawPointer) -> ClientConnection {
        Unmanaged<ClientConnection>.fromOpaque(userData).takeUnretainedValue()
    }

    /// Starts the I/O thread; it runs until ``ConnectionWakeups`` slot's `stopping` is set and its
    /// work is drained.
    func start() {
        let thread = Thread { [self] in
            run()
            let waiter = exited.withLock { state -> CheckedContinuation<Void, Never>? in
                state.done = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
        thread.name = "apns-connection-\(index)"
        thread.start()
    }

    /// Returns once the thread has exited.
    func waitUntilExited() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = exited.withLock { state -> Bool in
                if state.done { return true }
                state.waiter = continuation
                return false
            }
            if done { continuation.resume() }
        }
    }

    // MARK: The loop

    private func run() {
        var sigset = sigset_t()
        sigemptyset(&sigset)
        sigaddset(&sigset, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &sigset, nil)

        while true {
            let now = monotonicNanoseconds()
            if slot.stopping.load(ordering: .acquiring) {
                if shutdownDeadline == nil {
                    shutdownDeadline = now + min(shared.configuration.requestTimeout.nanoseconds, 10_000_000_000)
                }
                if session == nil { break }
                if streams.isEmpty || now >= shutdownDeadline! {
                    close(lostStreamsBecause: APNsClientError(.connectionLost, "the client shut down before APNs answered"))
                    break
                }
            }
            if session == nil {
                runDisconnected(now: now)
                continue
            }
            runConnected(now: now)
        }
    }

    /// No session: connect when woken for work (after the backoff); else sleep until woken. One
    /// request opens one connection (``ConnectionWakeups/wakeOne()`` wakes one sleeper); more open
    /// as callers outrun the open ones.
    private func runDisconnected(now: UInt64) {
        failExpiredQueued(now: now)
        let oldest = shared.queue.oldestEnqueuedAt()
        let hasWork = oldest != nil
        if hasWork, now >= nextConnectAt, !slot.stopping.load(ordering: .relaxed) {
            // A woken thread counts itself in; an unwoken one must win the claim (connecting 0 → 1).
            let claimed = wokenForWork ? (shared.wakeups.connecting.add(1, ordering: .acquiringAndReleasing), true).1 : claimUnwokenConnect(now: now, oldest: oldest!)
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
        guard let session else { return }
        if goawayLastStreamID == nil, !slot.stopping.load(ordering: .relaxed) {
            startStreams(session, now: now)
        }
        flush()
        if let failure {
            drop(failure)
            return
        }
        if now >= nextTimersAt {
            nextTimersAt = now + Self.timerInterval
            runTimers(now: now)
            if let failure {
                drop(failure)
                return
            }
        }
        if goawayLastStreamID != nil, streams.isEmpty {
            closeGracefully()
            return
        }
        guard self.session != nil else { return }

        let room = streamLimit - streams.count
        // Before the server's SETTINGS only one stream may open, but the connection will carry many
        // soon: it counts as having room, so callers wait for it instead of opening more connections.
        let expectedRoom = settingsReceived ? room : Self.streamCeiling - streams.count
        slot.freeStreams.store(goawayLastStreamID == nil ? max(expectedRoom, 0) : 0, ordering: .relaxed)
        if room <= 0, settingsReceived, let oldest = shared.queue.oldestEnqueuedAt(), now >= oldest &+ Self.growthWait {
            // Full, and work has waited for a stream long enough that answers come slowly (a far
            // server): another connection opens (one at a time).
            shared.wakeups.openAnother()
        }
        slot.sleeping.store(true, ordering: .sequentiallyConsistent)
        if room > 0, goawayLastStreamID == nil, !shared.queue.isEmpty {
            slot.sleeping.store(false, ordering: .relaxed)
            return
        }
        var descriptors = [
            pollfd(fd: fd, events: Int16(POLLIN) | (wantsWritable ? Int16(POLLOUT) : 0), revents: 0),
            pollfd(fd: slot.descriptor, events: Int16(POLLIN), revents: 0),
        ]
        let timeout: Int32 = streams.isEmpty && shared.queue.isEmpty ? 1000 : 100
        let ready = poll(&descriptors, 2, timeout)
        slot.sleeping.store(false, ordering: .relaxed)
        guard ready > 0 else { return }
        if descriptors[1].revents != 0 { slot.drain() }
        let events = descriptors[0].revents
        if events & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
            readAvailable(session)
            if let failure { drop(failure) }
        }
    }

    /// Concurrent streams allowed now: the server's limit (1 until its SETTINGS arrive, as APNs
    /// starts), capped by ``streamCeiling``.
    private var streamLimit: Int {
        guard let session, settingsReceived else { return 1 }
        let remote = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
        return min(remote, Self.streamCeiling)
    }

    // MARK: Requests

    private func startStreams(_ session: OpaquePointer, now: UInt64) {
        let room = streamLimit - streams.count
        guard room > 0 else { return }
        let requests = shared.queue.take(room)
        guard !requests.isEmpty else { return }
        lastActiveAt = now
        for (offset, request) in requests.enumerated() {
            if request.deadline <= now {
                request.complete(.failure(APNsClientError(.timeout, "no free stream within the request timeout")))
                continue
            }
            if !submit(request, session) {
                // Stream ids ran out or nghttp2 refused: the rest go back for a new connection.
                requeue(Array(requests[(offset + 1)...]))
                return
            }
        }
    }

    /// Submits one request; false when this session can take no more streams (the request was requeued).
    private func submit(_ request: PendingRequest, _ session: OpaquePointer) -> Bool {
        var authorization: (value: String, issuedAt: Int64)?
        if let tokens = shared.tokens {
            do {
                authorization = try tokens.authorization()
            } catch {
                request.complete(.failure(error))
                return true
            }
        }
        let notification = request.notification
        let fields = notification.headers(authority: shared.configuration.endpoint.authority, authorization: authorization?.value)
        var text: [UInt8] = []
        text.reserveCapacity(512 + (authorization?.value.utf8.count ?? 0))
        var ranges: [(name: Range<Int>, value: Range<Int>)] = []
        ranges.reserveCapacity(fields.count)
        for field in fields {
            let nameStart = text.count
            text.append(contentsOf: field.name.utf8)
            let valueStart = text.count
            text.append(contentsOf: field.value.utf8)
            ranges.append((nameStart..<valueStart, valueStart..<text.count))
        }
        let streamID = text.withUnsafeMutableBufferPointer { bytes -> Int32 in
            let base = bytes.baseAddress!
            var nameValues = ranges.map { range in
                nghttp2_nv(
                    name: base + range.name.lowerBound, value: base + range.value.lowerBound,
                    namelen: range.name.count, valuelen: range.value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
                )
            }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: ClientHTTP2Callbacks.readBody)
            return nghttp2_submit_request(session, nil, &nameValues, nameValues.count, &provider, nil)
        }
        guard streamID > 0 else {
            logger.debug("nghttp2 took no more streams", metadata: ["http2.error": "\(String(cString: nghttp2_strerror(streamID)))"])
            goawayLastStreamID = goawayLastStreamID ?? Int32.max
            requeue([request])
            return false
        }
        streams[streamID] = Stream(request: request, tokenIssuedAt: authorization?.issuedAt)
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

    // MARK: Timers

    private func runTimers(now: UInt64) {
        failExpiredQueued(now: now)
        if let session {
            var expired: [Int32] = []
            for (streamID, stream) in streams where stream.request.deadline <= now { expired.append(streamID) }
            for streamID in expired {
                guard let stream = streams.removeValue(forKey: streamID) else { continue }
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
                stream.request.complete(.failure(APNsClientError(.timeout, "APNs did not answer within the request timeout")))
            }
        }
        let configuration = shared.configuration
        if let pingSentAt {
            if now - pingSentAt > configuration.connectTimeout.nanoseconds {
                failure = APNsClientError(.connectionLost, "APNs did not answer a PING within \(configuration.connectTimeout)")
            }
        } else if now - lastReceivedAt > configuration.pingInterval.nanoseconds, let session {
            nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
            pingSentAt = now
        }
        if streams.isEmpty, shared.queue.isEmpty, now - lastActiveAt > configuration.idleTimeout.nanoseconds {
            logger.debug("closing an idle connection")
            goawayLastStreamID = goawayLastStreamID ?? Int32.max
        }
    }

    // MARK: Connecting

    private func connect() {
        let configuration = shared.configuration
        let deadline = monotonicNanoseconds() + configuration.connectTimeout.nanoseconds
        do {
            try openSocket(deadline: deadline)
            try handshake(deadline: deadline)
            try startSession()
        } catch {
            closeSocket()
            failedConnects += 1
            let delay = Self.reconnectDelay(afterFailures: failedConnects)
            nextConnectAt = monotonicNanoseconds() + delay
            logger.warning(
                "cannot connect to APNs",
                metadata: ["apns.endpoint": "\(configuration.endpoint)", "apns.error": "\(error)", "apns.retry_in_ms": "\(delay / 1_000_000)"]
            )
            if shared.openConnections.load(ordering: .relaxed) == 0 {
                // Nobody can send: callers hear now (a retryable error) instead of at their timeout.
                for request in shared.queue.removeAll() { request.complete(.failure(error)) }
            }
            return
        }
        failedConnects = 0
        let now = monotonicNanoseconds()
        lastReceivedAt = now
        lastActiveAt = now
        nextTimersAt = now + Self.timerInterval
        shared.openConnections.add(1, ordering: .relaxed)
        shared.connectionsOpened.add(1, ordering: .relaxed)
        slot.isOpen.store(true, ordering: .releasing)
        logger.debug("connected to APNs", metadata: ["apns.endpoint": "\(configuration.endpoint)"])
    }

    /// Reconnect backoff: 100 ms doubling per consecutive failure, capped at 5 s, with ±20% jitter.
    static func reconnectDelay(afterFailures failures: Int) -> UInt64 {
        let base = min(100_000_000 << UInt64(min(failures - 1, 6)), 5_000_000_000)
        let jitter = Double.random(in: 0.8...1.2)
        return UInt64(Double(base) * jitter)
    }

    private func openSocket(deadline: UInt64) throws(APNsClientError) {
        let endpoint = shared.configuration.endpoint
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var addresses: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(endpoint.host, String(endpoint.port), &hints, &addresses)
        guard resolved == 0, let addresses else {
            throw APNsClientError(.connectFailed, "cannot resolve \(endpoint.host): \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(addresses) }
        var lastError = APNsClientError(.connectFailed, "no address for \(endpoint.host)")
        var candidate: UnsafeMutablePointer<addrinfo>? = addresses
        while let address = candidate {
            candidate = address.pointee.ai_next
            let socketFD = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socketFD >= 0 else {
                lastError = .posix(.connectFailed, "socket")
                continue
            }
            _ = fcntl(socketFD, F_SETFL, fcntl(socketFD, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if Glibc.connect(socketFD, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                if let error = Self.waitConnected(socketFD, deadline: deadline, endpoint: endpoint) {
                    lastError = error
                    Glibc.close(socketFD)
                    continue
                }
                fd = socketFD
                return
            }
            lastError = .posix(.connectFailed, "connect to \(endpoint.authority)")
            Glibc.close(socketFD)
        }
        throw lastError
    }

    private static func waitConnected(_ socketFD: Int32, deadline: UInt64, endpoint: APNsEndpoint) -> APNsClientError? {
        while true {
            let now = monotonicNanoseconds()
            guard now < deadline else { return APNsClientError(.connectFailed, "connecting to \(endpoint.authority) timed out") }
            var descriptor = pollfd(fd: socketFD, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&descriptor, 1, Int32(max((deadline - now) / 1_000_000, 1)))
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { continue }
            var socketError: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(socketFD, SOL_SOCKET, SO_ERROR, &socketError, &length)
            return socketError == 0 ? nil : .posix(.connectFailed, "connect to \(endpoint.authority)", errno: socketError)
        }
    }

    private func handshake(deadline: UInt64) throws(APNsClientError) {
        let host = shared.configuration.endpoint.host
        guard let ssl = SSL_new(shared.tls.pointer) else { throw APNsClientError.openSSL(.connectFailed, "SSL_new failed") }
        self.ssl = ssl
        SSL_set_connect_state(ssl)
        guard SSL_set_fd(ssl, fd) == 1 else { throw APNsClientError.openSSL(.connectFailed, "SSL_set_fd failed") }
        if Self.isIPAddress(host) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 else {
                throw APNsClientError.openSSL(.connectFailed, "cannot check the certificate for \(host)")
            }
        } else {
            guard push_SSL_set_tlsext_host_name(ssl, host) == 1, SSL_set1_host(ssl, host) == 1 else {
                throw APNsClientError.openSSL(.connectFailed, "cannot set the server name \(host)")
            }
        }
        while true {
            ERR_clear_error()
            let result = SSL_do_handshake(ssl)
            if result == 1 { break }
            let events: Int16
            switch SSL_get_error(ssl, result) {
            case SSL_ERROR_WANT_READ: events = Int16(POLLIN)
            case SSL_ERROR_WANT_WRITE: events = Int16(POLLOUT)
            default:
                let verification = SSL_get_verify_result(ssl)
                if verification != Int(X509_V_OK) {
                    ERR_clear_error()
                    let why = String(cString: X509_verify_cert_error_string(verification))
                    throw APNsClientError(.connectFailed, "the certificate of \(host) is not trusted: \(why)")
                }
                throw APNsClientError.openSSL(.connectFailed, "TLS handshake with \(host) failed")
            }
            let now = monotonicNanoseconds()
            guard now < deadline else { throw APNsClientError(.connectFailed, "TLS handshake with \(host) timed out") }
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            _ = poll(&descriptor, 1, Int32(max((deadline - now) / 1_000_000, 1)))
        }
        var protocolName: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &protocolName, &length)
        guard let protocolName, length == 2, protocolName[0] == UInt8(ascii: "h"), protocolName[1] == UInt8(ascii: "2") else {
            throw APNsClientError(.connectFailed, "\(host) did not agree to HTTP/2 (ALPN h2)")
        }
    }

    private static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    private func startSession() throws(APNsClientError) {
        var session: OpaquePointer?
        let userData = Unmanaged.passUnretained(self).toOpaque()
        let created = nghttp2_session_client_new2(&session, shared.callbacks.callbacks, userData, shared.callbacks.options)
        guard created == 0, let session else { throw APNsClientError.nghttp2("nghttp2_session_client_new2", created) }
        self.session = session
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
        ]
        let submitted = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        guard submitted == 0 else { throw APNsClientError.nghttp2("nghttp2_submit_settings", submitted) }
        settingsReceived = false
        goawayLastStreamID = nil
        failure = nil
        pingSentAt = nil
        outbound.removeAll(keepingCapacity: true)
        outboundOffset = 0
        wantsWritable = false
    }

    // MARK: Closing

    /// The connection failed: unprocessed streams go back to the queue, the rest fail with `error`.
    private func drop(_ error: APNsClientError) {
        logger.info("APNs connection lost", metadata: ["apns.error": "\(error)", "apns.streams": "\(streams.count)"])
        close(lostStreamsBecause: error)
        failedConnects += 1
        nextConnectAt = monotonicNanoseconds() + Self.reconnectDelay(afterFailures: failedConnects)
    }

    /// GOAWAY'd (or idle, or out of stream ids) with every stream answered: a clean close; the next
    /// request opens a new connection at once.
    private func closeGracefully() {
        if let session {
            nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
            flush()
        }
        if let ssl {
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
            ERR_clear_error()
        }
        close(lostStreamsBecause: APNsClientError(.connectionLost, "the connection closed"))
        nextConnectAt = 0
    }

    private func close(lostStreamsBecause error: APNsClientError) {
        var unprocessed: [PendingRequest] = []
        for (streamID, stream) in streams.sorted(by: { $0.key < $1.key }) {
            if !stream.sent || streamID > (goawayLastStreamID ?? Int32.max) {
                unprocessed.append(stream.request)
            } else {
                stream.request.complete(.failure(error))
            }
        }
        streams.removeAll()
        if let session {
            nghttp2_session_del(session)
            self.session = nil
            shared.openConnections.subtract(1, ordering: .relaxed)
            slot.isOpen.store(false, ordering: .releasing)
        }
        closeSocket()
        requeue(unprocessed)
    }

    private func closeSocket() {
        if let ssl {
            SSL_free(ssl)
            self.ssl = nil
        }
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    // MARK: I/O

    private func readAvailable(_ session: OpaquePointer) {
        guard let ssl else { return }
        for _ in 0..<Self.readsPerPass {
            ERR_clear_error()
            let count = SSL_read(ssl, readBuffer.baseAddress, Int32(readBuffer.count))
            if count > 0 {
                lastReceivedAt = monotonicNanoseconds()
                let consumed = nghttp2_session_mem_recv(session, readBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int(count))
                if consumed < 0 {
                    failure = .nghttp2("HTTP/2 error from APNs", Int32(consumed))
                    return
                }
                if failure != nil { return }
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ:
                return
            case SSL_ERROR_WANT_WRITE:
                wantsWritable = true
                return
            case SSL_ERROR_ZERO_RETURN:
                failure = APNsClientError(.connectionLost, "APNs closed the connection")
                return
            default:
                failure = .openSSL(.connectionLost, "the connection to APNs failed")
                return
            }
        }
    }

    /// Moves nghttp2's output through TLS until done or the socket is full.
    private func flush() {
        guard let session, let ssl else { return }
        while true {
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
                    failure = .openSSL(.connectionLost, "writing to APNs failed")
                }
                return
            }
            wantsWritable = false
            var produced = false
            while outbound.count < Self.writeChunk {
                var data: UnsafePointer<UInt8>?
                let length = nghttp2_session_mem_send(session, &data)
                if length < 0 {
                    failure = .nghttp2("HTTP/2 error", Int32(length))
                    return
                }
                guard length > 0, let data else { break }
                outbound.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
                produced = true
            }
            if !produced { return }
        }
    }

    // MARK: nghttp2 callbacks

    func header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard let stream = streams[streamID] else { return 0 }
        if name.elementsEqual(":status".utf8) {
            stream.status = Int(String(decoding: value, as: UTF8.self))
        } else if name.elementsEqual("apns-id".utf8) {
            stream.apnsID = String(decoding: value, as: UTF8.self)
        } else if name.elementsEqual("apns-unique-id".utf8) {
            stream.apnsUniqueID = String(decoding: value, as: UTF8.self)
        }
        return 0
    }

    func data(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard let stream = streams[streamID], stream.body.count < 64 * 1024 else { return 0 }
        stream.body.append(contentsOf: bytes)
        return 0
    }

    func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        switch UInt32(frame.pointee.hd.type) {
        case NGHTTP2_SETTINGS.rawValue where frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
            settingsReceived = true
        case NGHTTP2_PING.rawValue where frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
            pingSentAt = nil
        case NGHTTP2_GOAWAY.rawValue:
            let goaway = frame.pointee.goaway
            goawayLastStreamID = min(goawayLastStreamID ?? Int32.max, goaway.last_stream_id)
            var reason = ""
            if goaway.opaque_data_len > 0, let data = goaway.opaque_data {
                reason = String(decoding: UnsafeBufferPointer(start: data, count: min(goaway.opaque_data_len, 512)), as: UTF8.self)
            }
            let level: Logger.Level = goaway.error_code == NGHTTP2_NO_ERROR.rawValue ? .debug : .warning
            logger.log(
                level: level, "APNs sent GOAWAY",
                metadata: [
                    "http2.last_stream_id": "\(goaway.last_stream_id)", "http2.error_code": "\(goaway.error_code)",
                    "apns.reason": "\(reason)",
                ]
            )
        default:
            break
        }
        return 0
    }

    func frameSent(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        if UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue, let stream = streams[frame.pointee.hd.stream_id] {
            stream.sent = true
        }
        return 0
    }

    func frameNotSent(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let streamID = frame.pointee.hd.stream_id
        if UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue, let stream = streams[streamID], !stream.sent {
            streams[streamID] = nil
            requeue([stream.request])
        }
        return 0
    }

    func streamClosed(_ streamID: Int32, errorCode: UInt32) -> Int32 {
        guard let stream = streams.removeValue(forKey: streamID) else { return 0 }
        guard let status = stream.status else {
            if errorCode == NGHTTP2_REFUSED_STREAM.rawValue || !stream.sent || streamID > (goawayLastStreamID ?? Int32.max) {
                requeue([stream.request])
            } else {
                stream.request.complete(.failure(APNsClientError(.connectionLost, "APNs reset the stream (HTTP/2 error \(errorCode))")))
            }
            return 0
        }
        var response = APNsResponse(status: status, apnsID: stream.apnsID, apnsUniqueID: stream.apnsUniqueID, body: stream.body)
        response.roundTrip = .nanoseconds(Int64(monotonicNanoseconds() &- stream.openedAt))
        if response.reason == .expiredProviderToken, let tokens = shared.tokens, let issuedAt = stream.tokenIssuedAt,
            tokens.expired(usedIssuedAt: issuedAt), stream.request.claimFreshTokenResend()
        {
            logger.notice("APNs called the provider token expired; resending with a new one")
            if shared.queue.requeue([stream.request]) {
                shared.wakeups.wakeAll()
                return 0
            }
        }
        stream.request.complete(.success(response))
        return 0
    }

    func readRequestBody(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let stream = streams[streamID] else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let payload = stream.request.notification.payload
        let count = min(buffer.count, payload.count - stream.bodyOffset)
        payload.withUnsafeBufferPointer { source in
            buffer.baseAddress!.update(from: source.baseAddress! + stream.bodyOffset, count: count)
        }
        stream.bodyOffset += count
        if stream.bodyOffset == payload.count {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        }
        return count
    }
}
