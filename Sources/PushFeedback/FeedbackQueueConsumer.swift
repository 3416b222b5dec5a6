public import AMQP
import Foundation
public import Logging
public import PushCore
import PushServiceKit
public import ServiceLifecycle
import TokenRegistry

/// Consumes `push.feedback` (``PushCore/FeedbackEvent`` JSON) and removes dead tokens under
/// CONTRACT.md's invalid-token rule, announcing each removal as `token.removed` on `push.events`.
///
/// Deliveries are handled in batches: whatever has arrived, up to ``FeedbackConfiguration/batchSize``,
/// is decoded, its Lua calls go to Redis in one pipeline, its events and dead letters are published
/// together with confirms, and the batch is then settled with one `multiple` ack. Up to
/// ``FeedbackConfiguration/batchesInFlight`` batches run at once, but each settles only after the one
/// before it, so a `multiple` ack never covers a delivery that is still being worked on.
///
/// Outcomes per delivery:
/// - **valid** → removed (and announced), kept (registered again after the report) or not found;
///   acked once its event is confirmed. A redelivered event finds the token gone and changes nothing,
///   but announces the removal again if a removal note says an earlier try removed it (that try may
///   have died before its event was confirmed);
/// - **malformed** (not JSON, a missing or bad field, an unknown reason or app) or refused by the
///   registry for good (a corrupt record) → the original body and properties go to `push.dead` with the
///   reason, naming the field, in `x-push-error`; acked after the confirm;
/// - **Redis unavailable** → retried through the queue's delayed-retry tier (5 s, 60 s, then 10 min,
///   at most ``PushServiceKit/DeliverySettler/maximumRetries`` times, then dead-lettered); acked after
///   the confirm;
/// - a **publish that failed** (broker trouble) → the delivery is requeued after
///   ``PushServiceKit/DeliverySettler/publishFailureBackoff``; redoing it is harmless.
///
/// The loop and the settling are the service kit's (``PushServiceKit/BoundedConsumer``,
/// ``PushServiceKit/DeliverySettler``). On graceful shutdown the consumer stops taking deliveries, finishes and settles every batch it
/// holds, and returns.
public struct FeedbackQueueConsumer: Service {
    private let amqp: AMQPConnection
    private let remover: TokenRemover
    private let apps: AppsFile?
    private let queues: PushQueues
    private let configuration: FeedbackConfiguration
    private let metrics: FeedbackMetrics
    private let settler: DeliverySettler
    private let logger: Logger
    private let now: @Sendable () -> Int64
    private let crashGuard: CrashGuard?
    /// Where removals are counted in their request's report (nil: not counted).
    private let reports: ReportWriter?

    /// - Parameters:
    ///   - apps: the configured apps; events for other apps are dead-lettered. `nil` accepts any app.
    ///   - crashGuard: finds an event that crashes push-feedback (nil: unguarded).
    ///   - now: the clock for events and removal notes, ms since 1970.
    public init(
        amqp: AMQPConnection,
        registry: TokenRegistry,
        apps: AppsFile?,
        queues: PushQueues = .standard,
        configuration: FeedbackConfiguration,
        metrics: FeedbackMetrics,
        crashGuard: CrashGuard? = nil,
        reports: RequestReports? = nil,
        logger: Logger,
        now: @escaping @Sendable () -> Int64 = FeedbackClock.milliseconds
    ) {
        self.amqp = amqp
        self.reports = reports.map { ReportWriter(reports: $0, logger: logger) }
        self.crashGuard = crashGuard
        self.remover = TokenRemover(registry: registry, amqp: amqp, queues: queues, noteLifetime: configuration.removalNoteLifetime, metrics: metrics)
        self.apps = apps
        self.queues = queues
        self.configuration = configuration
        self.metrics = metrics
        self.settler = DeliverySettler(queue: queues.feedback, queues: queues, subject: "feedback event", gaveUp: "token registry unavailable")
        self.logger = logger.consuming(queues.feedback)
        self.now = now
    }

    /// Handles feedback in batches (``FeedbackConfiguration/batchSize`` events,
    /// ``FeedbackConfiguration/batchesInFlight`` batches at once, on ``PushServiceKit/BoundedConsumer``)
    /// until graceful shutdown or cancellation; then settles every batch it holds and returns.
    ///
    /// - Throws: when the broker cancels the consumer (the queue was deleted), after that drain.
    public func run() async throws {
        let consumer = amqp.consume(queue: queues.feedback.name, prefetch: configuration.prefetch)
        logger.info(
            "consuming feedback",
            metadata: ["push.batch_size": "\(configuration.batchSize)", "push.batches_in_flight": "\(configuration.batchesInFlight)"]
        )
        let bounds = BoundedConsumer.Bounds(workers: configuration.batchesInFlight, batchSize: configuration.batchSize)
        let loop = BoundedConsumer(name: "feedback consumer", bounds: bounds, logger: logger, crashGuard: crashGuard)
        try await loop.run(consumer) { deliveries, turn in await self.process(deliveries, turn: turn) }
    }

    // MARK: One batch

    /// What to do with one delivery of a batch, and its metric outcome once settled as decided.
    private struct Work {
        var outcome: FeedbackMetrics.Outcome
        var disposition: DeliveryDisposition

        /// Done, once `event` (if any) is confirmed.
        static func done(_ outcome: FeedbackMetrics.Outcome, event: AMQPOutboundMessage?) -> Work {
            Work(outcome: outcome, disposition: event.map { .ackAfterPublishing([$0]) } ?? .ack)
        }
    }

    /// Decides, then settles the batch once every earlier batch is settled (`turn`). Never throws.
    func process(_ deliveries: [AMQPDelivery], turn: SettlementTurn) async {
        let work = await decide(deliveries)
        let settled = await settler.settle(deliveries, work.map(\.disposition), amqp: amqp, turn: turn, logger: logger)
        for (item, result) in zip(work, settled) {
            switch result.outcome {
            case .settled: metrics.count(result.settlement.gaveUp ? .refused : item.outcome)
            case .requeued: metrics.count(.requeued)
            case .superseded: break
            }
        }
    }

    /// Decodes and removes; what to do with each delivery.
    private func decide(_ deliveries: [AMQPDelivery]) async -> [Work] {
        metrics.batch(size: deliveries.count)
        let now = now()
        var work = [Work](repeating: .done(.notFound, event: nil), count: deliveries.count)
        var reports: [InvalidTokenReport] = []
        var owners: [Int] = []
        reports.reserveCapacity(deliveries.count)
        owners.reserveCapacity(deliveries.count)
        for (index, delivery) in deliveries.enumerated() {
            do throws(FeedbackError) {
                let report = try InvalidTokenReport(feedbackBody: delivery.body)
                if let apps, apps.app(bundleID: report.app) == nil {
                    throw FeedbackError(.invalidField, field: "app", "names no configured app: \(Self.quoted(report.app))")
                }
                reports.append(report)
                owners.append(index)
            } catch {
                logger.notice("invalid feedback event", metadata: ["push.error": "\(error.message)"])
                work[index] = Work(outcome: .malformed, disposition: .deadLetter(reason: error.message))
            }
        }
        if !reports.isEmpty {
            do {
                let steps = try await remover.remove(reports, now: now) { [deliveries, owners] report in
                    Self.mayHaveBeenApplied(deliveries[owners[report]])
                }
                await countRemovals(reports, steps: steps, deliveries: deliveries, owners: owners)
                for (position, step) in steps.enumerated() {
                    let index = owners[position]
                    let report = reports[position]
                    let event = step.event.map { remover.message(for: $0) }
                    switch step.outcome {
                    case .success(.removed):
                        work[index] = .done(.removed, event: event)
                        logger.debug(
                            "token removed",
                            metadata: ["push.app": "\(report.app)", "push.token": "\(report.token.redacted)", "push.reason": "\(report.reason)"]
                        )
                    case .success(.keptRegisteredAfter):
                        work[index] = .done(.kept, event: event)
                    case .success(.notFound):
                        work[index] = .done(.notFound, event: event)
                    case .failure(let error) where error.isRetryable:
                        work[index] = Work(outcome: .retried, disposition: .retry(reason: error.message))
                    case .failure(let error):
                        logger.error("registry refused a feedback event", metadata: ["push.error": "\(error.message)"])
                        work[index] = Work(outcome: .refused, disposition: .deadLetter(reason: error.message))
                    }
                }
            } catch {
                logger.debug("invalid-token removal failed; every event of the batch goes again", metadata: ["push.error": "\(error.message)"])
                for index in owners { work[index] = Work(outcome: .retried, disposition: .retry(reason: error.message)) }
            }
        }
        return work
    }

    /// Counts each removal in the report of the request that found the token invalid: a token removed
    /// now, or found removed on a redelivery (an earlier try removed it and may have stopped before
    /// counting it). One field per token, so counting twice is harmless. What Redis cannot take now
    /// waits in the ``PushServiceKit/ReportWriter``.
    private func countRemovals(_ reports: [InvalidTokenReport], steps: [TokenRemover.Step], deliveries: [AMQPDelivery], owners: [Int]) async {
        guard let requestReports = self.reports else { return }
        var removals: [ReportWriter.Update] = []
        for (position, step) in steps.enumerated() where position < reports.count {
            guard let requestID = reports[position].requestID else { continue }
            switch step.outcome {
            case .success(.removed):
                break
            case .success(.notFound(_?)) where Self.mayHaveBeenApplied(deliveries[owners[position]]):
                break
            default:
                logger.debug(
                    "removal not counted in the request's report",
                    metadata: [
                        "push.token": "\(reports[position].token.redacted)", "push.outcome": "\(step.outcome)",
                        "push.redelivered": "\(Self.mayHaveBeenApplied(deliveries[owners[position]]))",
                    ])
                continue
            }
            removals.append(.removed(app: reports[position].app, requestID: requestID, token: reports[position].token.hex))
        }
        await requestReports.write(removals)
    }

    /// Whether an earlier try may have applied this delivery: the broker redelivered it, or it came back
    /// from a retry tier (a timed-out pipeline may still have run).
    static func mayHaveBeenApplied(_ delivery: AMQPDelivery) -> Bool {
        delivery.redelivered || delivery.properties.headers[DeliverySettler.retriesHeader] != nil
    }

    private static func quoted(_ text: String) -> String {
        "\"\(text.count > 64 ? String(text.prefix(64)) + "…" : text)\""
    }
}

/// Wall-clock ms since 1970.
public enum FeedbackClock {
    @Sendable public static func milliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded())
    }
}
