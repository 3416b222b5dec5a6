import APNs
import Foundation
import HTTP2Transport
import Logging

/// What a worker thread's connections share: the TLS context, the rules copy,
/// the answer logic, the batch of deliveries and counts, timers and the clock. Confined to its thread.
final class WorkerContext {
    let tls: TLSContext
    let logger: Logger
    let readBuffer: UnsafeMutableRawBufferPointer
    let state: SandboxState
    let verifier: ProviderTokenVerifier
    var random: FastRandom
    private(set) var rules: SandboxRules
    private var rulesGeneration: UInt64
    var batch = WorkerBatch()
    /// ``SandboxConfiguration/strictPriorities``.
    var strictPriorities = false
    /// `--confirm-answers`: connections confirm accepted answers with PINGs (``AnswerLedger``).
    var confirmsAnswers = false
    /// ``SandboxConfiguration/idleTimeout`` in ms; nil never closes an idle connection.
    var idleTimeoutMilliseconds: UInt64?
    private(set) var timers = DeadlineHeap<DelayedAnswer>()
    /// Connections with output to move this pass, and connections to serve again without poll.
    private(set) var flushQueue: [HTTP2Connection] = []
    private(set) var serviceQueue: [HTTP2Connection] = []
    /// Wall clock (ms since 1970) and monotonic clock (ms), read once per event-loop pass.
    private(set) var wallMilliseconds: Int64 = 0
    private(set) var monotonicMilliseconds: UInt64 = 0
    private let clockOrigin = ContinuousClock.now

    /// Bytes read from TLS at a time (a TLS record holds at most 16 KiB).
    static let readBufferSize = 32 * 1024

    init(tls: TLSContext, state: SandboxState, verifier: ProviderTokenVerifier, seed: UInt64?, logger: Logger) {
        self.tls = tls
        self.state = state
        self.verifier = verifier
        self.random = seed.map { FastRandom(seed: $0) } ?? FastRandom()
        self.logger = logger
        (rules, rulesGeneration) = state.rules()
        readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readBufferSize, alignment: 16)
        updateClock()
    }

    deinit {
        readBuffer.deallocate()
    }

    func updateClock() {
        wallMilliseconds = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        let elapsed = ContinuousClock.now - clockOrigin
        monotonicMilliseconds = UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
    }

    /// Takes the admin API's latest token states and faults when they changed.
    func refreshRules() {
        guard state.generation != rulesGeneration else { return }
        (rules, rulesGeneration) = state.rules()
    }

    /// Validates, applies faults and token states, counts, and records a delivery. `tokens` is the
    /// connection's record of its provider tokens (``ConnectionTokens``).
    func answer(
        _ request: PushRequest, authentication: ConnectionAuthentication, tokens: inout ConnectionTokens, role: ListenerRole = .combined
    )
        -> PushAnswer
    {
        let route = ChannelRoute(path: request.path)
        guard role.serves(route) else {
            // The other host's API, as Apple's servers answer it.
            let refusal = PushRejection(404, .badPath)
            if route == nil {
                batch.count(status: 404, reason: refusal.reason.rawValue)
            } else {
                batch.countChannelRequest(status: 404, reason: refusal.reason.rawValue)
            }
            return PushAnswer(
                status: 404, apnsID: request.validAPNsID ?? random.uuidString(), uniqueID: nil, body: refusal.body,
                idHeader: route == nil ? "apns-id" : "apns-request-id")
        }
        if case .none = authentication, let authorization = request.value(of: "authorization"),
            let identity = verifier.identity(of: authorization),
            let refusal = tokens.admit(keyID: identity.keyID, issuedAt: identity.issuedAt)
        {
            batch.count(status: refusal.status, reason: refusal.reason.rawValue)
            let requestID = ChannelRoute(path: request.path) != nil
            return PushAnswer(
                status: refusal.status, apnsID: request.validAPNsID ?? random.uuidString(), uniqueID: nil, body: refusal.body,
                idHeader: requestID ? "apns-request-id" : "apns-id")
        }
        if let route {
            return answerChannelRequest(request, route: route, authentication: authentication)
        }
        let apnsID = request.validAPNsID ?? random.uuidString()
        let rejection: PushRejection?
        switch PushRequestValidator.validate(
            request, authentication: authentication, providerTokens: verifier, now: wallMilliseconds / 1000, strictPriorities: strictPriorities)
        {
        case .rejected(let refusal):
            rejection = refusal
        case .accepted(let push):
            let roll = rules.faults.statusRates.isEmpty ? 1 : random.nextUnitInterval()
            rejection = rules.rejection(for: push, roll: roll)
            if rejection == nil {
                batch.deliveries.append(
                    RecordedDelivery(
                        token: push.deviceToken,
                        topic: push.topic,
                        headers: request.headers.filter { $0.name != "authorization" },
                        payload: request.body,
                        receivedAt: wallMilliseconds
                    )
                )
            }
        }
        if let rejection {
            batch.count(status: rejection.status, reason: rejection.reason.rawValue)
            return PushAnswer(status: rejection.status, apnsID: apnsID, uniqueID: nil, body: rejection.body)
        }
        batch.count(status: 200, reason: nil)
        return PushAnswer(status: 200, apnsID: apnsID, uniqueID: random.uuidString(), body: [])
    }

    /// Sends the batch to the shared state (one lock) before this pass's answers are written.
    func commitBatch() {
        guard !batch.isEmpty else { return }
        state.commit(batch)
        batch.reset()
    }

    func schedule(_ answer: DelayedAnswer, afterMilliseconds delay: UInt64) {
        timers.insert(answer, deadline: monotonicMilliseconds + delay)
    }

    func popDueTimer() -> DelayedAnswer? {
        timers.popDue(now: monotonicMilliseconds)
    }

    func queueFlush(_ connection: HTTP2Connection) {
        guard !connection.isQueuedForFlush else { return }
        connection.isQueuedForFlush = true
        flushQueue.append(connection)
    }

    func queueService(_ connection: HTTP2Connection) {
        guard !connection.isQueuedForService else { return }
        connection.isQueuedForService = true
        serviceQueue.append(connection)
    }

    func takeFlushQueue() -> [HTTP2Connection] {
        defer { flushQueue.removeAll(keepingCapacity: true) }
        for connection in flushQueue { connection.isQueuedForFlush = false }
        return flushQueue
    }

    func takeServiceQueue() -> [HTTP2Connection] {
        defer { serviceQueue.removeAll(keepingCapacity: true) }
        for connection in serviceQueue { connection.isQueuedForService = false }
        return serviceQueue
    }
}
