public import AMQP
import APNs
import Foundation
public import Logging
import Metrics
public import PushCore
import PushServiceKit
import RateLimiting

/// Takes one `push.send` delivery from message to settlement: decode, skip what APNs already accepted,
/// apply rate limits, send every remaining token concurrently, classify each answer, publish what the
/// outcomes ask for (``SendBatchPlan``) with confirms, and only then ack.
///
/// - A body that is not a usable send batch, or names no configured app, goes to `push.dead` as is,
///   with the reason (naming the field) in `x-push-error`.
/// - A batch of a paused app is republished to a retry tier at once (see ``AppPauses``).
/// - A batch past its expiration is dropped and reported as `failed.Expired`.
/// - Redis trouble does not stop sending: without the dedupe lookup a redelivered batch may send
///   duplicates, without rate limits it sends unthrottled; both are logged.
/// - When a publish fails (broker trouble), or the batch was interrupted by shutdown, the delivery is
///   nacked back to the queue (after the dedupe marks of what APNs accepted are written).
public struct SendBatchProcessor: Sendable {
    let amqp: AMQPConnection
    let apps: AppsFile
    let clients: APNsClientPool
    let ledger: DeliveryLedger
    let marker: AcceptanceMarker
    let window: SendWindow
    /// One copy of a mark set at a time: a batch redelivered while its first copy still has
    /// notifications in flight reads the marks only once that copy settled them.
    let markSetLocks = KeyedLocks()
    let rateLimits: SendRateLimits?
    let pauses: AppPauses
    let queues: PushQueues
    let policy: RetryPolicy
    let configuration: SendConfiguration
    let metrics: SendMetrics
    /// Where settled batches are counted for the request reports (nil: not counted).
    let reports: ReportWriter?
    /// Where credential pauses are noted for operators (nil: not noted).
    let pauseNotes: AppPauseNotes?
    let settler: DeliverySettler
    let logger: Logger
    let now: @Sendable () -> Int64

    /// Reason of tokens deferred because their app's sending is paused.
    static let pausedReason = "AppPaused"
    /// Reason (`failed.Unknown`) of an at-most-once notification that may or may not have reached APNs.
    static let unknownReason = "Unknown"
    /// Reason of at-most-once tokens deferred because their claims could not be read.
    static let ledgerUnavailableReason = "LedgerUnavailable"

    public init(
        amqp: AMQPConnection,
        apps: AppsFile,
        clients: APNsClientPool,
        ledger: DeliveryLedger,
        rateLimits: SendRateLimits?,
        pauses: AppPauses,
        queues: PushQueues,
        configuration: SendConfiguration,
        reports: RequestReports? = nil,
        pauseNotes: AppPauseNotes? = nil,
        logger: Logger,
        now: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
    ) {
        self.amqp = amqp
        self.apps = apps
        self.clients = clients
        self.ledger = ledger
        self.marker = AcceptanceMarker(ledger: ledger, logger: logger)
        let metrics = clients.metrics
        self.window = SendWindow(floor: configuration.minInFlight, ceiling: configuration.maxInFlight) { metrics.windowSize($0) }
        self.rateLimits = rateLimits
        self.pauses = pauses
        self.queues = queues
        self.policy = RetryPolicy(
            tiers: queues.send.retryTiers, maxAttempts: configuration.maxAttempts, maxDeferrals: configuration.maxDeferrals,
            serverErrorWait: configuration.serverErrorRetry)
        self.configuration = configuration
        self.metrics = clients.metrics
        self.reports = reports.map { ReportWriter(reports: $0, logger: logger) }
        self.pauseNotes = pauseNotes
        // Send batches never ask for a retry of the whole batch: their tokens' retries are batches of
        // their own (SendBatchPlan).
        self.settler = DeliverySettler(queue: queues.send, queues: queues, subject: "send batch", gaveUp: "not sent")
        self.logger = logger
        self.now = now
    }

    /// Settles `delivery` exactly once; never throws.
    public func process(_ delivery: AMQPDelivery) async {
        let decoded: DecodedSendBatch
        do {
            decoded = try DecodedSendBatch(body: delivery.body)
        } catch {
            logger.notice("invalid send batch", metadata: ["push.error": "\(error.message)"])
            await deadLetter(delivery, reason: error.message)
            return
        }
        let batch = decoded.batch
        guard let app = apps.app(bundleID: batch.app) else {
            let reason = "app: names no configured app (\"\(batch.app)\")"
            logger.notice("send batch for an unknown app", metadata: ["push.error": "\(reason)", "push.batch_id": "\(batch.batchID)"])
            await deadLetter(delivery, reason: reason)
            return
        }
        var logger = self.logger
        logger[metadataKey: "push.app"] = "\(app.bundleID)"
        logger[metadataKey: "push.request_id"] = "\(batch.requestID)"
        logger[metadataKey: "push.batch_id"] = "\(batch.batchID)"
        if let channel = batch.channel {
            await processBroadcast(delivery, decoded, app: app, channel: channel, logger: logger)
            return
        }
        let markKey = ledger.key(app: app.bundleID, markSet: batch.effectiveMarkSet)
        await markSetLocks.lock(markKey)
        let (disposition, plan) = await sendBatch(delivery, decoded, app: app, markKey: markKey, logger: logger)
        let settled = await settler.settle(delivery, disposition, amqp: amqp, logger: logger)
        if let plan {
            switch settled.outcome {
            case .settled: record(plan.plan, app: app.bundleID, as: plan.settlement, logger: logger)
            case .requeued: metrics.batch("requeued")
            case .superseded: metrics.batch("superseded")
            }
        }
        markSetLocks.unlock(markKey)
    }

    /// The rest of ``process(_:)``, for one copy of a mark set at a time (``markSetLocks``): sends,
    /// and returns what to do with the delivery and, when it is to be acked after publishing them, the
    /// batch's outcomes with the metrics label to record them under.
    private func sendBatch(
        _ delivery: AMQPDelivery, _ decoded: DecodedSendBatch, app: AppConfiguration, markKey: String, logger: Logger
    ) async -> (DeliveryDisposition, (plan: SendBatchPlan, settlement: String)?) {
        let batch = decoded.batch

        // A header anyone could have set: clamped, so no value can overflow the arithmetic after it.
        let deferrals = Int(
            Swift.min(Swift.max(delivery.properties.headers[SendBatchPlan.deferralsHeader]?.intValue ?? 0, 0), Int64(RetryPolicy.maximumCount)))
        var report = SendBatchReport(batch: batch, deferrals: deferrals)
        let started = now()
        var settlement = "acked"
        if let wait = pauses.remaining(app.bundleID, now: started) {
            report.recordAll(.deferred(reason: Self.pausedReason, retryAfter: wait))
            settlement = "paused"
        } else if RetryPolicy.isExpired(expiration: batch.expiration, now: started) {
            report.recordAll(.dropped(reason: "Expired"))
        } else {
            metrics.setPaused(app: app.bundleID, false)
            await send(decoded, delivery: delivery, app: app, markKey: markKey, into: &report, logger: logger)
        }
        if !delivery.isSettleable {
            // The broker connection dropped: the broker delivers this batch again, and that copy
            // (waiting in markSetLocks) reads the marks this one wrote and does the rest. Publishing
            // this copy's retries or events as well would only repeat them.
            logger.info("broker connection lost while the batch was in flight; its redelivery takes over")
            metrics.batch("superseded")
            return (.abandon, nil)
        }

        let plan = report.plan(policy: policy, now: now(), credentialPause: configuration.credentialPause)
        if plan.isUnfinished {
            logger.info("send batch interrupted by shutdown; returning it to the queue")
            metrics.batch("requeued")
            return (.requeue(after: .zero), nil)
        }
        if let problem = plan.credentialProblem {
            pauseApp(app.bundleID, reason: problem, logger: logger)
        }
        if app.delivery.guarantee == .atMostOnce {
            await releaseClaims(of: plan, app: app.bundleID, logger: logger)
        }
        await countInReport(plan, outcomes: report.outcomes, app: app.bundleID, markKey: markKey, logger: logger)
        return (.ackAfterPublishing(plan.messages(queues: queues)), (plan, settlement))
    }

    /// Counts a settled batch's outcomes.
    private func record(_ plan: SendBatchPlan, app: String, as settlement: String, logger: Logger) {
        metrics.batch(settlement)
        if plan.delivered > 0 { metrics.delivered(app: app, count: plan.delivered) }
        for (reason, tokens) in plan.failures { metrics.failed(reason, app: app, count: tokens.count) }
        for (reason, count) in plan.retried { metrics.retried(reason, count: count) }
        for (reason, count) in plan.deferred { metrics.deferred(reason, count: count) }
        logger.debug(
            "send batch settled",
            metadata: [
                "push.delivered": "\(plan.delivered)", "push.already_delivered": "\(plan.alreadyDelivered)",
                "push.failed": "\(plan.failures.values.reduce(0) { $0 + $1.count })",
                "push.retried": "\(plan.retried.values.reduce(0, +))", "push.deferred": "\(plan.deferred.values.reduce(0, +))",
            ]
        )
    }

    /// Counts the batch in its request's report before the batch is acked, so a crash before the ack
    /// makes the redelivered copy count it again (replacing this count). Delivered is what the mark
    /// set's marks say once this copy's marks are written (so it includes what any other copy of the
    /// mark set delivered), joined with what this copy itself saw accepted (in case Redis lost marks).
    /// When Redis cannot take the count, ``PushServiceKit/ReportWriter`` keeps it until it can:
    /// reports never hold up delivery.
    private func countInReport(
        _ plan: SendBatchPlan, outcomes: [(token: String, outcome: TokenOutcome)], app: String, markKey: String, logger: Logger
    ) async {
        guard let reports else { return }
        let batch = plan.batch
        var slotOfToken: [String: Int] = [:]
        for index in batch.tokens.indices { slotOfToken[batch.tokens[index]] = batch.slot(at: index) }
        let marks = try? await ledger.marks(key: markKey)
        var accepted = marks?.acceptedCount ?? 0
        for (token, outcome) in outcomes where outcome == .delivered {
            if let slot = slotOfToken[token], marks?.isAccepted(slot: slot) != true { accepted += 1 }
        }
        let tally = BatchTally(
            failed: plan.failures.mapValues(\.count), retried: plan.retried.values.reduce(0, +), deferred: plan.deferred.values.reduce(0, +))
        let settled = RequestReports.SettledBatch(
            requestID: batch.requestID, markSet: batch.effectiveMarkSet, accepted: accepted,
            batchKey: "\(batch.batchID)#\(SendBatch.fingerprint(batch.tokens))", tally: tally,
            tokens: batch.markSet == nil ? batch.tokens.count : nil, deliveredAt: plan.delivered > 0 ? plan.now : nil)
        await reports.write([.settled(app: app, batch: settled)])
    }

    // MARK: Sending

    /// Records an outcome for every token of the batch that reaches this point.
    private func send(
        _ decoded: DecodedSendBatch, delivery: AMQPDelivery, app: AppConfiguration, markKey: String, into report: inout SendBatchReport,
        logger: Logger
    ) async {
        let batch = decoded.batch
        let atMostOnce = app.delivery.guarantee == .atMostOnce
        // Indices into batch.tokens still to send.
        var pending = Array(batch.tokens.indices)

        do {
            let marks = try await ledger.marks(key: markKey)
            if !marks.isEmpty {
                var skipped = 0
                pending.removeAll { index in
                    let slot = batch.slot(at: index)
                    if marks.isAccepted(slot: slot) {
                        report.record(batch.tokens[index], .alreadyDelivered)
                        skipped += 1
                        return true
                    }
                    if atMostOnce, marks.isClaimed(slot: slot) {
                        // Handed to APNs before a crash, answer never recorded: at most once means not again.
                        report.record(batch.tokens[index], .dropped(reason: Self.unknownReason))
                        return true
                    }
                    return false
                }
                if skipped > 0 { metrics.duplicatesSkipped.increment(by: Int64(skipped)) }
            }
        } catch {
            if atMostOnce {
                // Without the claims an at-most-once batch cannot tell what it already sent: wait.
                logger.warning("delivery marks unreadable; deferring an at-most-once batch", metadata: ["push.error": "\(error)"])
                for index in pending { report.record(batch.tokens[index], .deferred(reason: Self.ledgerUnavailableReason, retryAfter: .seconds(5))) }
                return
            }
            logger.warning("dedupe lookup failed; sending without it (a redelivered batch may send duplicates)", metadata: ["push.error": "\(error)"])
        }

        if let rateLimits, !pending.isEmpty {
            do {
                let decisions = try await rateLimits.check(app: app, tokens: pending.map { batch.tokens[$0] })
                var allowed: [Int] = []
                allowed.reserveCapacity(pending.count)
                var dropped = 0
                var deferred = 0
                for (index, decision) in zip(pending, decisions) {
                    switch decision {
                    case .allowed:
                        allowed.append(index)
                    case .limited(let retryAfter):
                        if batch.priority == 1 && app.rateLimits.dropLowPriority {
                            report.record(batch.tokens[index], .dropped(reason: "RateLimited"))
                            dropped += 1
                        } else {
                            report.record(batch.tokens[index], .deferred(reason: "RateLimited", retryAfter: retryAfter))
                            deferred += 1
                        }
                    }
                }
                if dropped > 0 { metrics.rateLimited("dropped", count: dropped) }
                if deferred > 0 { metrics.rateLimited("deferred", count: deferred) }
                pending = allowed
            } catch {
                logger.warning("rate limit check failed; sending without it", metadata: ["push.error": "\(error)"])
            }
        }
        guard !pending.isEmpty else { return }

        let client: any NotificationSending
        do {
            client = try clients.client(app: app, environment: batch.environment)
        } catch {
            logger.critical(
                "cannot make an APNs client for the app: its credentials or endpoint are unusable",
                metadata: ["push.error": "\(error)", "push.environment": "\(batch.environment.rawValue)"]
            )
            for index in pending { report.record(batch.tokens[index], .credentialProblem(reason: "InvalidCredentials")) }
            return
        }
        if Task.isCancelled {
            for index in pending { report.record(batch.tokens[index], .unfinished) }
            return
        }

        let collapseID = batch.collapseID ?? (app.delivery.collapseIDFromRequest ? CollapseID.derived(fromRequestID: batch.requestID) : nil)
        let outcomes = await sendAll(
            decoded, delivery: delivery, indices: pending, client: client, markKey: markKey, collapseID: collapseID, atMostOnce: atMostOnce
        )
        // Every `delivered` here already has its dedupe mark in Redis (see sendAll).
        for (index, outcome) in zip(pending, outcomes) {
            report.record(batch.tokens[index], outcome ?? .unfinished)
        }
    }

    /// Sends every token, as fast as the process-wide ``SendWindow`` lets it, and waits for the answers
    /// (or for cancellation; see ``AnswerCollector``). A 200 counts as answered once its dedupe mark is
    /// written (``AcceptanceMarker``), so the batch is acked only after its marks are in Redis. For an
    /// at-most-once app each notification's claim is written before it goes out, and an answer that
    /// never came (connection lost, timeout) is `failed.Unknown` rather than another try.
    ///
    /// One task per batch takes window places a chunk at a time and hands each notification to the
    /// client with a completion callback: no task or continuation per notification.
    ///
    /// A redelivered batch may have another copy still sending (a push-send whose broker connection
    /// dropped, answering after APNs' round trip): it reads the marks again right before each chunk
    /// and skips what was accepted since it started.
    private func sendAll(
        _ decoded: DecodedSendBatch, delivery: AMQPDelivery, indices: [Int], client: any NotificationSending, markKey: String,
        collapseID: String?, atMostOnce: Bool
    ) async -> [TokenOutcome?] {
        let collector = AnswerCollector(count: indices.count)
        let timeout = configuration.requestTimeout
        let metrics = self.metrics
        let marker = self.marker
        let window = self.window
        let ledger = self.ledger
        let batch = decoded.batch
        let rereadMarks = delivery.isRedelivery && !atMostOnce
        metrics.inFlight(indices.count)
        // Unstructured on purpose: requests the batch stops waiting for (shutdown) still finish,
        // bounded by the client, and what APNs accepts after that is still marked.
        Task {
            var next = 0
            while next < indices.count {
                let granted = await window.acquire(upTo: indices.count - next)
                let chunk = next..<(next + granted)
                next += granted
                // A batch that stopped waiting (shutdown) has gone back to the queue, and one whose
                // broker connection dropped will be delivered again: what it has not sent stays unsent.
                let abandoned = collector.isAbandoned
                if abandoned || !delivery.isSettleable {
                    for _ in chunk { window.release(holding: nil) }
                    for position in chunk.lowerBound..<indices.count {
                        metrics.inFlight(-1)
                        if !abandoned { collector.record(position, .unfinished) }
                    }
                    return
                }
                // Accepted since the batch started (by another copy of it): skipped, not sent again.
                var accepted = Set<Int>()
                if rereadMarks, let marks = try? await ledger.marks(key: markKey) {
                    for position in chunk where marks.isAccepted(slot: batch.slot(at: indices[position])) { accepted.insert(position) }
                    if !accepted.isEmpty {
                        metrics.duplicatesSkipped.increment(by: Int64(accepted.count))
                        for position in accepted {
                            window.release(holding: nil)
                            metrics.inFlight(-1)
                            collector.record(position, .alreadyDelivered)
                        }
                    }
                }
                if atMostOnce {
                    var last: UInt64 = 0
                    for position in chunk { last = marker.mark(key: markKey, bit: DeliveryMarks.claimedBit(slot: batch.slot(at: indices[position]))) }
                    await marker.waitUntilWritten(through: last)
                }
                for position in chunk where !accepted.contains(position) {
                    let slot = batch.slot(at: indices[position])
                    let started = ContinuousClock.now
                    client.send(decoded.notification(token: batch.tokens[indices[position]], collapseID: collapseID), timeout: timeout) { result in
                        let outcome = Self.outcome(of: result, atMostOnce: atMostOnce)
                        // APNs' own latency, without the time the request waited for a stream: the
                        // window sizes itself by it (a queue in front of full connections must not
                        // look like a far server).
                        let roundTrip: Duration?
                        if case .success(let response) = result {
                            metrics.latency.recordNanoseconds(Self.nanoseconds(ContinuousClock.now - started))
                            roundTrip = response.roundTrip
                        } else {
                            roundTrip = nil
                        }
                        let settle: @Sendable () -> Void = {
                            window.release(holding: roundTrip)
                            if outcome != .unfinished { metrics.sent.increment() }
                            metrics.inFlight(-1)
                            collector.record(position, outcome)
                        }
                        if outcome == .delivered {
                            // The place in the window is freed once the dedupe mark is in Redis.
                            marker.mark(key: markKey, bit: DeliveryMarks.acceptedBit(slot: slot), then: settle)
                        } else {
                            settle()
                        }
                    }
                }
            }
        }
        return await collector.wait()
    }

    /// What a send's result means for the token; at most once turns "maybe accepted" into `Unknown`.
    static func outcome(of result: Result<APNsResponse, APNsClientError>, atMostOnce: Bool) -> TokenOutcome {
        switch result {
        case .success(let response):
            return TokenOutcome(response: response)
        case .failure(let error):
            if atMostOnce, TokenOutcome.mayHaveBeenAccepted(error) { return .dropped(reason: unknownReason) }
            return TokenOutcome(error: error)
        }
    }

    /// Clears the claims of an at-most-once batch's tokens that go to a retry tier: APNs answered
    /// them with a refusal (or they were never sent), so another try cannot be a twin. Without this
    /// the next try would read the claim as "maybe accepted" and report `failed.Unknown`.
    private func releaseClaims(of plan: SendBatchPlan, app: String, logger: Logger) async {
        var bits: [(key: String, bit: Int)] = []
        for retry in plan.republished {
            let key = ledger.key(app: app, markSet: retry.batch.effectiveMarkSet)
            for index in retry.batch.tokens.indices { bits.append((key, DeliveryMarks.claimedBit(slot: retry.batch.slot(at: index)))) }
        }
        do {
            try await ledger.write(bits, value: false)
        } catch {
            logger.warning(
                "could not release the claims of retried at-most-once notifications; their next try reports failed.Unknown",
                metadata: ["push.error": "\(error)", "push.tokens": "\(bits.count)"]
            )
        }
    }

    // MARK: Credential pauses

    func pauseApp(_ app: String, reason: String, logger: Logger) {
        metrics.credentialFailure(app: app)
        metrics.setPaused(app: app, true)
        if pauses.pause(app, for: configuration.credentialPause, now: now()) {
            // The operators' note (the console's status page), written when a pause starts.
            if let pauseNotes {
                let duration = configuration.credentialPause
                Task { try? await pauseNotes.write(app: app, reason: reason, duration: duration) }
            }
            logger.critical(
                "APNs refused the app's credentials: its sending is paused, its batches wait in the retry tiers. Fix the key or certificate in the apps file.",
                metadata: ["push.reason": "\(reason)", "push.pause_s": "\(configuration.credentialPause.components.seconds)"]
            )
        }
    }

    // MARK: Dead letters

    /// Dead-letters an unusable batch as is, with `reason`.
    private func deadLetter(_ delivery: AMQPDelivery, reason: String) async {
        let settled = await settler.settle(delivery, .deadLetter(reason: reason), amqp: amqp, logger: logger)
        switch settled.outcome {
        case .settled: metrics.batch("invalid")
        case .requeued: metrics.batch("requeued")
        case .superseded: metrics.batch("superseded")
        }
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
