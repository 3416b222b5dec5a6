public import AMQP
import Foundation
public import Logging
public import PushCore
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
/// - **Redis unavailable** → republished to the queue's delayed-retry tier (5 s, 60 s, then 10 min,
///   counted in ``retriesHeader``, at most ``maximumRetries`` times, then dead-lettered); acked after
///   the confirm;
/// - a **publish that failed** (broker trouble) → the delivery is requeued after
///   ``publishFailureBackoff``; redoing it is harmless.
///
/// On graceful shutdown the consumer stops taking deliveries, finishes and settles every batch it
/// holds, and returns.
public struct FeedbackQueueConsumer: Service {
    /// Header counting how often a message went through a retry tier.
    public static let retriesHeader = "x-push-retries"
    /// Retry-tier passes before a message that keeps meeting an unavailable Redis is dead-lettered:
    /// 5 s + 60 s + 8 × 10 min ≈ 81 minutes of outage survived without an operator.
    public static let maximumRetries = 10
    /// The pause before requeueing a batch whose publishes failed.
    public static let publishFailureBackoff: Duration = .seconds(1)

    private let amqp: AMQPConnection
    private let remover: TokenRemover
    private let apps: AppsFile?
    private let queues: PushQueues
    private let configuration: FeedbackConfiguration
    private let metrics: FeedbackMetrics
    private let logger: Logger
    private let now: @Sendable () -> Int64

    /// - Parameters:
    ///   - apps: the configured apps; events for other apps are dead-lettered. `nil` accepts any app.
    ///   - now: the clock for events and removal notes, ms since 1970.
    public init(
        amqp: AMQPConnection,
        registry: TokenRegistry,
        apps: AppsFile?,
        queues: PushQueues = .standard,
        configuration: FeedbackConfiguration,
        metrics: FeedbackMetrics,
        logger: Logger,
        now: @escaping @Sendable () -> Int64 = FeedbackClock.milliseconds
    ) {
        self.amqp = amqp
        self.remover = TokenRemover(registry: registry, amqp: amqp, queues: queues, noteLifetime: configuration.removalNoteLifetime, metrics: metrics)
        self.apps = apps
        self.queues = queues
        self.configuration = configuration
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: "push.queue"] = "\(queues.feedback.name)"
        self.logger = logger
        self.now = now
    }

    /// Consumes until graceful shutdown or cancellation, then drains and settles what it holds.
    ///
    /// - Throws: when the broker cancels the consumer (the queue was deleted); what was received is
    ///   finished first.
    public func run() async throws {
        let consumer = amqp.consume(queue: queues.feedback.name, prefetch: configuration.prefetch)
        logger.info(
            "consuming feedback",
            metadata: ["push.batch_size": "\(configuration.batchSize)", "push.batches_in_flight": "\(configuration.batchesInFlight)"]
        )
        let inbox = DeliveryInbox<AMQPDelivery>()
        let batchSize = Swift.max(1, configuration.batchSize)
        let limit = Swift.max(1, configuration.batchesInFlight)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    do {
                        for try await delivery in consumer { inbox.put(delivery) }
                        inbox.finish()
                    } catch {
                        inbox.finish(failure: error)
                    }
                }
                var inFlight = 0
                var previous: OneShotGate?
                while let deliveries = await inbox.take(max: batchSize) {
                    if inFlight >= limit {
                        await group.next()
                        inFlight -= 1
                    }
                    let settledBefore = previous
                    let settled = OneShotGate()
                    previous = settled
                    group.addTask {
                        let dispositions = await self.process(deliveries)
                        await settledBefore?.wait()
                        await self.settle(deliveries, dispositions)
                        settled.open()
                    }
                    inFlight += 1
                }
                await group.waitForAll()
            }
        } onGracefulShutdown: {
            consumer.cancel()
        }
        if let failure = inbox.failure {
            logger.error("feedback consumer stopped", metadata: ["push.error": "\(failure)"])
            throw failure
        }
        logger.info("feedback consumer drained")
    }

    // MARK: One batch

    /// What to do with a delivery once its batch's publishes are done.
    enum Disposition: Sendable, Equatable {
        case ack
        case requeue
    }

    /// One delivery's messages to publish, and its metric outcome.
    private struct Work {
        var outcome: FeedbackMetrics.Outcome
        var messages: [AMQPOutboundMessage] = []
    }

    /// Decodes, removes, publishes; returns each delivery's disposition. Never throws.
    func process(_ deliveries: [AMQPDelivery]) async -> [Disposition] {
        metrics.batch(size: deliveries.count)
        let now = now()
        var work = [Work](repeating: Work(outcome: .notFound), count: deliveries.count)
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
                work[index] = Work(outcome: .malformed, messages: [deadLetter(delivery, reason: error.message)])
            }
        }
        var firstRetryReason: String?
        if !reports.isEmpty {
            do {
                let steps = try await remover.remove(reports, now: now) { [deliveries, owners] report in
                    Self.mayHaveBeenApplied(deliveries[owners[report]])
                }
                for (position, step) in steps.enumerated() {
                    let index = owners[position]
                    let report = reports[position]
                    switch step.outcome {
                    case .success(.removed):
                        work[index].outcome = .removed
                        logger.debug(
                            "token removed",
                            metadata: ["push.app": "\(report.app)", "push.token": "\(report.token.redacted)", "push.reason": "\(report.reason)"]
                        )
                    case .success(.keptRegisteredAfter):
                        work[index].outcome = .kept
                    case .success(.notFound):
                        work[index].outcome = .notFound
                    case .failure(let error) where error.isRetryable:
                        firstRetryReason = firstRetryReason ?? error.message
                        work[index] = retry(deliveries[index], error: error)
                    case .failure(let error):
                        logger.error("registry refused a feedback event", metadata: ["push.error": "\(error.message)"])
                        work[index] = Work(outcome: .refused, messages: [deadLetter(deliveries[index], reason: error.message)])
                    }
                    if let event = step.event { work[index].messages.append(remover.message(for: event)) }
                }
            } catch {
                firstRetryReason = error.message
                for index in owners { work[index] = retry(deliveries[index], error: error) }
            }
        }
        let retried = work.filter { $0.outcome == .retried }.count
        if retried > 0 {
            // One line per batch: a Redis outage would otherwise log every event.
            logger.warning(
                "registry unavailable; feedback events scheduled for retry",
                metadata: ["push.retried": "\(retried)", "push.error": "\(firstRetryReason ?? "unknown")"]
            )
        }
        return await publish(work)
    }

    /// Publishes every delivery's messages in one go; a delivery is acked when all of its were
    /// confirmed, requeued otherwise.
    private func publish(_ work: [Work]) async -> [Disposition] {
        var messages: [AMQPOutboundMessage] = []
        var owners: [Int] = []
        for (index, item) in work.enumerated() {
            for message in item.messages {
                messages.append(message)
                owners.append(index)
            }
        }
        var dispositions = [Disposition](repeating: .ack, count: work.count)
        var firstFailure: AMQPError?
        for (position, result) in await amqp.publish(messages).enumerated() {
            if case .failure(let error) = result {
                dispositions[owners[position]] = .requeue
                firstFailure = firstFailure ?? error
            }
        }
        for (index, item) in work.enumerated() {
            metrics.count(dispositions[index] == .ack ? item.outcome : .requeued)
        }
        if let firstFailure {
            logger.error(
                "could not publish feedback results; requeueing those events",
                metadata: ["push.amqp_error": "\(firstFailure)", "push.requeued": "\(dispositions.filter { $0 == .requeue }.count)"]
            )
        }
        return dispositions
    }

    /// Settles a batch: requeues (after the backoff) what must be redone, then acks the rest with one
    /// `multiple` ack on the last of them.
    private func settle(_ deliveries: [AMQPDelivery], _ dispositions: [Disposition]) async {
        let plan = Self.settlementPlan(dispositions)
        if !plan.requeue.isEmpty {
            try? await Task.sleep(for: Self.publishFailureBackoff)
            for index in plan.requeue { deliveries[index].nack(requeue: true) }
        }
        if let last = plan.ackThrough {
            deliveries[last].ack(multiple: true)
        }
    }

    /// Which deliveries of a batch to requeue (each alone, first), and the last one to ack with
    /// `multiple` (which acks every earlier unsettled delivery on the channel: the batch's others,
    /// since earlier batches are settled by then and later ones hold higher delivery tags).
    static func settlementPlan(_ dispositions: [Disposition]) -> (requeue: [Int], ackThrough: Int?) {
        (dispositions.indices.filter { dispositions[$0] == .requeue }, dispositions.lastIndex(of: .ack))
    }

    /// Whether an earlier try may have applied this delivery: the broker redelivered it, or it came back
    /// from a retry tier (a timed-out pipeline may still have run).
    static func mayHaveBeenApplied(_ delivery: AMQPDelivery) -> Bool {
        delivery.redelivered || delivery.properties.headers[retriesHeader] != nil
    }

    // MARK: Dead letters and retries

    /// The original body and properties, with the reason in `x-push-error`, for `push.dead`.
    private func deadLetter(_ delivery: AMQPDelivery, reason: String) -> AMQPOutboundMessage {
        var properties = delivery.properties
        properties.headers[PushQueues.errorHeader] = .string(reason)
        return AMQPOutboundMessage(exchange: queues.exchange, routingKey: queues.deadRoutingKey, body: delivery.body, properties: properties)
    }

    /// A copy for the next retry tier, or a dead letter once ``maximumRetries`` are used up.
    private func retry(_ delivery: AMQPDelivery, error: RegistryError) -> Work {
        let retries = Int(delivery.properties.headers[Self.retriesHeader]?.intValue ?? 0)
        guard let target = queues.feedback.retryQueue(afterRetries: retries, maximum: Self.maximumRetries) else {
            logger.error("registry unavailable; retries used up", metadata: ["push.error": "\(error.message)", "push.retries": "\(retries)"])
            return Work(outcome: .refused, messages: [deadLetter(delivery, reason: "token registry unavailable after \(retries) retries: \(error.message)")])
        }
        var properties = delivery.properties
        properties.headers[Self.retriesHeader] = .int64(Int64(retries + 1))
        // Retry tiers dead-letter back to the work queue through the default exchange.
        return Work(outcome: .retried, messages: [AMQPOutboundMessage(exchange: "", routingKey: target, body: delivery.body, properties: properties)])
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
