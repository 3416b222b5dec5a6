import HTTP2Transport
import IOSupport

/// What the state machine needs to know of a stream the driver tracks.
protocol ClientStream {
    /// The server sent the stream's `:status`.
    var isAnswered: Bool { get }
}

/// The decisions of one client HTTP/2 connection to APNs, as a value: which streams it may open,
/// what becomes of each stream when it closes, when to PING, when to give up on a silent server, when
/// to close (GOAWAY, idle, out of stream ids, shutdown) and when to connect again (``Backoff/apns``).
///
/// Reconnecting never becomes a loop: a connection opens at most once per
/// ``Configuration/minimumConnectInterval``, and after a failure (a lost connection, an error GOAWAY)
/// the wait grows with each failure until a connection proves itself (APNs answers one of its
/// notifications with something other than a 403, 429 or 5xx, or it stays up for
/// ``Configuration/provenAfter``). A server that accepts the handshake and then sends GOAWAY at once
/// therefore costs one attempt every few seconds, not one every few milliseconds.
///
/// It owns the stream table (`Stream` is the driver's per-stream object) and returns what to do;
/// the driver (``ClientConnection``) owns the socket, TLS and nghttp2 and carries the actions out.
/// Time is passed in as monotonic nanoseconds, so every rule is tested without a socket or a clock.
///
/// The rule that keeps delivery exact: a stream the server cannot have processed (never sent,
/// refused with `REFUSED_STREAM`, or above a GOAWAY's last stream id) is requeued for another
/// connection; a stream lost after it was sent fails with `connectionLost` (APNs may have accepted it).
struct ClientConnectionStateMachine<Stream: ClientStream> {
    struct Configuration {
        /// Longest wait for a PING's answer before the connection counts as dead.
        var pingTimeout: UInt64
        /// A PING goes out when nothing was received for this long.
        var pingInterval: UInt64
        /// A connection with nothing in flight or queued for this long closes.
        var idleTimeout: UInt64
        /// Longest time shutdown waits for in-flight streams.
        var shutdownGrace: UInt64
        /// How often timers run.
        var timerInterval: UInt64 = 100_000_000
        /// Never more streams than this, whatever the server allows.
        var streamCeiling = 1000
        var backoff = Backoff.apns
        /// Connections of this slot open at most this often, whatever closed the last one.
        var minimumConnectInterval: UInt64 = 1_000_000_000
        /// A connection up this long counts as working: the failures before it are forgotten.
        var provenAfter: UInt64 = 60_000_000_000

        init(pingTimeout: UInt64, pingInterval: UInt64, idleTimeout: UInt64, shutdownGrace: UInt64) {
            self.pingTimeout = pingTimeout
            self.pingInterval = pingInterval
            self.idleTimeout = idleTimeout
            self.shutdownGrace = shutdownGrace
        }
    }

    private struct Entry {
        let stream: Stream
        let deadline: UInt64
        /// HEADERS went out: from here on the server may have processed it.
        var sent = false
    }

    /// What the driver does next.
    enum Action {
        /// Send a PING.
        case ping
        /// Reset a stream that outlived its deadline and fail its request with `timeout`.
        case reset(streamID: Int32, Stream)
        /// The connection is dead (`reason`): drop it (``connectionLost(now:random:)``).
        case drop(reason: String)
    }

    /// What became of a closed stream.
    enum StreamOutcome {
        /// Not ours (already settled).
        case unknown
        /// Answered: complete it with the response.
        case answered(Stream)
        /// The server never processed it: send it on another connection.
        case requeue(Stream)
        /// Lost after it was sent: fail it with `connectionLost` and this reason.
        case lost(Stream, reason: String)
    }

    /// Streams of a closing connection: those to send again elsewhere (in stream order) and those lost.
    struct Closing {
        var requeue: [Stream] = []
        var lost: [Stream] = []
    }

    let configuration: Configuration
    private var streams: [Int32: Entry] = [:]
    private(set) var isConnected = false
    private(set) var settingsReceived = false
    private var remoteStreamLimit = 1
    /// No stream above this is processed (GOAWAY's last stream id; `Int32.max` when this side closes).
    private(set) var goawayLastStreamID: Int32?
    private var lastReceivedAt: UInt64 = 0
    private var lastActiveAt: UInt64 = 0
    private var pingSentAt: UInt64?
    private var nextTimersAt: UInt64 = 0
    /// Failures since a connection last proved itself: the backoff's exponent.
    private(set) var failedConnects = 0
    private(set) var nextConnectAt: UInt64 = 0
    /// When the current (or last) connection opened; nil before the first.
    private var connectedAt: UInt64?
    /// The GOAWAY the current connection received, if any.
    private(set) var goaway: APNsGoaway?
    private(set) var shutdownDeadline: UInt64?

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    // MARK: Connecting

    /// Whether a disconnected connection may connect now (its backoff has passed).
    func mayConnect(now: UInt64) -> Bool {
        !isConnected && shutdownDeadline == nil && now >= nextConnectAt
    }

    /// A connection is up. The failures before it still count until it proves itself.
    mutating func connected(now: UInt64) {
        isConnected = true
        settingsReceived = false
        remoteStreamLimit = 1
        goawayLastStreamID = nil
        goaway = nil
        pingSentAt = nil
        connectedAt = now
        lastReceivedAt = now
        lastActiveAt = now
        nextTimersAt = now + configuration.timerInterval
    }

    /// Connecting failed: returns the wait before the next attempt (``Backoff/apns``).
    mutating func connectFailed(now: UInt64, random: Double) -> UInt64 {
        scheduleReconnect(now: now, random: random, failed: true)
        return nextConnectAt - now
    }

    /// Sets ``nextConnectAt``: after the backoff when `failed` (one more failure), and never sooner
    /// than ``Configuration/minimumConnectInterval`` after the last connection opened.
    private mutating func scheduleReconnect(now: UInt64, random: Double, failed: Bool) {
        var at: UInt64 = 0
        if failed {
            failedConnects += 1
            at = now + configuration.backoff.delay(afterFailures: failedConnects - 1, random: random).nanoseconds
        }
        if let connectedAt { at = max(at, connectedAt + configuration.minimumConnectInterval) }
        nextConnectAt = at
    }

    /// APNs answered a notification on this connection: unless the answer is one a broken credential,
    /// throttling or an unwell server gives (403, 429, 5xx), or APNs is closing the connection for an
    /// error, the connection works.
    mutating func answered(status: Int) {
        if status != 403, status != 429, status < 500, goaway?.isError != true { failedConnects = 0 }
    }

    // MARK: Streams

    /// Concurrent streams allowed now: the server's limit (1 until its SETTINGS arrive, as APNs
    /// starts), capped by the ceiling.
    var streamLimit: Int { settingsReceived ? min(remoteStreamLimit, configuration.streamCeiling) : 1 }

    /// Streams that may open now (0 once closing).
    var room: Int {
        guard isConnected, goawayLastStreamID == nil, shutdownDeadline == nil else { return 0 }
        return max(streamLimit - streams.count, 0)
    }

    /// Streams other threads should count on this connection for: before the server's SETTINGS only
    /// one may open, but it will carry many soon, so callers wait for it instead of opening more.
    var advertisedRoom: Int {
        guard isConnected, goawayLastStreamID == nil else { return 0 }
        return max((settingsReceived ? streamLimit : configuration.streamCeiling) - streams.count, 0)
    }

    var openStreams: Int { streams.count }

    func stream(_ streamID: Int32) -> Stream? { streams[streamID]?.stream }

    /// A stream was submitted.
    mutating func opened(streamID: Int32, _ stream: Stream, deadline: UInt64, now: UInt64) {
        streams[streamID] = Entry(stream: stream, deadline: deadline)
        lastActiveAt = now
    }

    /// nghttp2 took no more streams (ids ran out): finish what is open, then close.
    mutating func streamsExhausted() {
        goawayLastStreamID = goawayLastStreamID ?? Int32.max
    }

    /// A stream's HEADERS went out.
    mutating func headersSent(streamID: Int32) {
        streams[streamID]?.sent = true
    }

    /// nghttp2 dropped a stream's HEADERS before sending them: returned to be requeued.
    mutating func headersNotSent(streamID: Int32) -> Stream? {
        guard let entry = streams[streamID], !entry.sent else { return nil }
        streams[streamID] = nil
        return entry.stream
    }

    /// A stream closed (answered, refused, reset or cut off).
    mutating func streamClosed(streamID: Int32, errorCode: UInt32) -> StreamOutcome {
        guard let entry = streams.removeValue(forKey: streamID) else { return .unknown }
        if entry.stream.isAnswered { return .answered(entry.stream) }
        if errorCode == HTTP2ErrorCode.refusedStream || !entry.sent || streamID > (goawayLastStreamID ?? Int32.max) {
            return .requeue(entry.stream)
        }
        return .lost(entry.stream, reason: "APNs reset the stream (HTTP/2 error \(errorCode))")
    }

    // MARK: Frames and input

    /// Bytes arrived (the connection is alive).
    mutating func received(now: UInt64) {
        lastReceivedAt = now
    }

    mutating func settingsReceived(maximumConcurrentStreams: Int) {
        settingsReceived = true
        remoteStreamLimit = max(maximumConcurrentStreams, 0)
    }

    mutating func pingAcknowledged() {
        pingSentAt = nil
    }

    /// GOAWAY: nothing above `lastStreamID` is processed; the connection closes once the rest answered
    /// (or APNs closes it), and an error GOAWAY (``APNsGoaway/isError``) makes the next connection wait.
    mutating func goawayReceived(lastStreamID: Int32, _ goaway: APNsGoaway) {
        goawayLastStreamID = min(goawayLastStreamID ?? Int32.max, lastStreamID)
        if self.goaway == nil || goaway.isError { self.goaway = goaway }
    }

    // MARK: Timers

    /// Whether timers are due (they run every ``Configuration/timerInterval``).
    func timersDue(now: UInt64) -> Bool { isConnected && now >= nextTimersAt }

    /// Runs the timers: expired streams, PING and its timeout, idle close.
    mutating func runTimers(now: UInt64, queueIsEmpty: Bool) -> [Action] {
        guard isConnected else { return [] }
        nextTimersAt = now + configuration.timerInterval
        if failedConnects > 0, goaway == nil, let connectedAt, now &- connectedAt >= configuration.provenAfter { failedConnects = 0 }
        var actions: [Action] = []
        let expired = streams.filter { $0.value.deadline <= now }.keys.sorted()
        for streamID in expired {
            guard let entry = streams.removeValue(forKey: streamID) else { continue }
            actions.append(.reset(streamID: streamID, entry.stream))
        }
        if let pingSentAt {
            if now &- pingSentAt > configuration.pingTimeout {
                actions.append(.drop(reason: "APNs did not answer a PING within \(Duration.nanoseconds(Int64(clamping: configuration.pingTimeout)))"))
                return actions
            }
        } else if now &- lastReceivedAt > configuration.pingInterval {
            pingSentAt = now
            actions.append(.ping)
        }
        if streams.isEmpty, queueIsEmpty, goawayLastStreamID == nil, now &- lastActiveAt > configuration.idleTimeout {
            goawayLastStreamID = Int32.max
        }
        return actions
    }

    /// Whether the connection should close cleanly now: closing (GOAWAY, idle, exhausted) and drained.
    var shouldCloseGracefully: Bool { isConnected && goawayLastStreamID != nil && streams.isEmpty }

    // MARK: Closing

    /// The connection failed: splits its streams and schedules the next attempt after the backoff
    /// (unless APNs said it was closing routinely, with a GOAWAY for `Shutdown` or `IdleTimeout`).
    mutating func connectionLost(now: UInt64, random: Double) -> Closing {
        let failed = goaway?.isError ?? true
        let closing = close()
        scheduleReconnect(now: now, random: random, failed: failed)
        return closing
    }

    /// Closed with every stream settled (GOAWAY, idle, out of stream ids, shutdown): the next request
    /// may connect after the floor, or after the backoff when the GOAWAY was an error.
    mutating func closed(now: UInt64, random: Double) -> Closing {
        let failed = goaway?.isError ?? false
        let closing = close()
        scheduleReconnect(now: now, random: random, failed: failed)
        return closing
    }

    private mutating func close() -> Closing {
        var closing = Closing()
        let lastProcessed = goawayLastStreamID ?? Int32.max
        for (streamID, entry) in streams.sorted(by: { $0.key < $1.key }) {
            if !entry.sent || streamID > lastProcessed {
                closing.requeue.append(entry.stream)
            } else {
                closing.lost.append(entry.stream)
            }
        }
        streams.removeAll()
        isConnected = false
        settingsReceived = false
        goawayLastStreamID = nil
        goaway = nil
        pingSentAt = nil
        return closing
    }

    // MARK: Shutdown

    enum ShutdownStep: Equatable {
        /// Keep serving the streams in flight.
        case drain
        /// Close now (streams still open are lost) and stop the thread.
        case closeAndExit
        /// Nothing open: stop the thread.
        case exit
    }

    /// The client is stopping: in-flight streams get until the grace period ends.
    mutating func shutdown(now: UInt64) -> ShutdownStep {
        if shutdownDeadline == nil { shutdownDeadline = now + configuration.shutdownGrace }
        guard isConnected else { return .exit }
        return streams.isEmpty || now >= shutdownDeadline! ? .closeAndExit : .drain
    }
}
