public import AMQP
public import Logging

/// How one delivery was settled, for the consumer's metrics.
public struct SettledDelivery: Sendable {
    public enum Outcome: Sendable {
        /// As ``settlement`` said: published, then acked (or requeued, when that was the plan).
        case settled
        /// A publish failed; the delivery was requeued after ``DeliverySettler/publishFailureBackoff``.
        case requeued(AMQPError)
        /// Its connection was gone before anything was published; the redelivery takes over.
        case superseded
    }

    public let settlement: DeliverySettlement
    public let outcome: Outcome
}

extension DeliverySettler {
    /// Settles `delivery` as `disposition` says, exactly once: publishes what it takes with
    /// confirms, then acks, or requeues after ``publishFailureBackoff`` when a publish failed.
    @discardableResult
    public func settle(_ delivery: AMQPDelivery, _ disposition: DeliveryDisposition, amqp: AMQPConnection, logger: Logger) async -> SettledDelivery {
        await settle([delivery], [disposition], amqp: amqp, turn: nil, logger: logger)[0]
    }

    /// Settles a batch: every delivery's messages are published in one go; then, once `turn` says
    /// every earlier batch is settled, the requeues go first and the acks follow as one `multiple` ack
    /// (``SettlementPlan``). Without a turn each delivery is acked on its own.
    ///
    /// - Returns: how each delivery was settled, in order.
    @discardableResult
    public func settle(
        _ deliveries: [AMQPDelivery], _ dispositions: [DeliveryDisposition], amqp: AMQPConnection, turn: SettlementTurn?, logger: Logger
    ) async -> [SettledDelivery] {
        precondition(deliveries.count == dispositions.count, "one disposition per delivery")
        var settlements = zip(deliveries, dispositions).map { settlement(for: $1, body: $0.body, properties: $0.properties) }
        let settleable = deliveries.map(\.isSettleable)
        var messages: [AMQPOutboundMessage] = []
        var owners: [Int] = []
        for index in deliveries.indices where settleable[index] {
            for message in settlements[index].messages {
                messages.append(message)
                owners.append(index)
            }
        }
        var failures = [AMQPError?](repeating: nil, count: deliveries.count)
        for (position, result) in await amqp.publish(messages).enumerated() {
            if case .failure(let error) = result, failures[owners[position]] == nil { failures[owners[position]] = error }
        }
        // What a delivery led to cannot be put on the wire at all (a property over AMQP's limits):
        // trying again cannot help, so the delivery itself is dead-lettered with that reason.
        let unpublishable = deliveries.indices.filter { failures[$0]?.code == .invalidMessage }
        if !unpublishable.isEmpty {
            let letters = unpublishable.map { index in
                let reason = "\(subject) led to a message AMQP cannot carry: \(failures[index]!.message)"
                return (index, deadLetter(body: deliveries[index].body, properties: deliveries[index].properties, reason: reason), reason)
            }
            for ((index, letter, reason), result) in zip(letters, await amqp.publish(letters.map(\.1))) {
                if case .failure(let error) = result {
                    failures[index] = error
                } else {
                    failures[index] = nil
                    settlements[index] = .deadLetter(letter, reason: reason, gaveUp: false)
                    logger.error("\(subject) dead-lettered: what it led to cannot be published", metadata: ["push.error": "\(reason)"])
                }
            }
        }
        let actions = deliveries.indices.map { settlements[$0].action(settleable: settleable[$0], publishFailed: failures[$0] != nil) }
        let settled = deliveries.indices.map { index -> SettledDelivery in
            if let failure = failures[index] { return SettledDelivery(settlement: settlements[index], outcome: .requeued(failure)) }
            let superseded = !settleable[index] && !settlements[index].messages.isEmpty
            return SettledDelivery(settlement: settlements[index], outcome: superseded ? .superseded : .settled)
        }
        log(settled, logger: logger)

        await turn?.waitForEarlierBatches()
        let plan = SettlementPlan(actions, multipleAck: turn != nil)
        if !plan.requeue.isEmpty {
            if plan.requeueDelay > .zero { try? await Task.sleep(for: plan.requeueDelay) }
            for index in plan.requeue { deliveries[index].nack(requeue: true) }
        }
        for index in plan.ack { deliveries[index].ack() }
        if let last = plan.ackThrough { deliveries[last].ack(multiple: true) }
        return settled
    }

    /// One line per kind of event in a batch (a broker or Redis outage would otherwise log every
    /// delivery), but one per delivery whose retries ran out.
    private func log(_ settled: [SettledDelivery], logger: Logger) {
        var retried: [(queue: String, retries: Int, reason: String)] = []
        var requeued: [(settlement: DeliverySettlement, error: AMQPError)] = []
        var superseded = 0
        for item in settled {
            switch item.outcome {
            case .settled:
                if case .retry(let message, let retries, let reason) = item.settlement { retried.append((message.routingKey, retries, reason)) }
            case .requeued(let error):
                requeued.append((item.settlement, error))
            case .superseded:
                superseded += 1
            }
            if case .deadLetter(_, let reason, true) = item.settlement {
                logger.error("\(subject) retries used up; dead-lettering it", metadata: ["push.error": "\(reason)"])
            }
        }
        if let first = retried.first {
            var metadata: Logger.Metadata = [
                "push.error": "\(first.reason)", "push.retry_queue": "\(first.queue)", "push.retries": "\(first.retries)",
            ]
            if retried.count > 1 { metadata["push.retried"] = "\(retried.count)" }
            logger.warning("\(subject) scheduled for retry", metadata: metadata)
        }
        if let first = requeued.first {
            let what: String
            var metadata: Logger.Metadata = ["push.amqp_error": "\(first.error)"]
            switch first.settlement {
            case .retry(_, _, let reason):
                what = "could not schedule a retry for a \(subject); requeueing"
                metadata["push.error"] = "\(reason)"
            case .deadLetter(_, let reason, _):
                what = "could not dead-letter a \(subject); requeueing"
                metadata["push.error"] = "\(reason)"
            default:
                what = "could not publish what a \(subject) led to; requeueing"
                metadata["push.messages"] = "\(first.settlement.messages.count)"
            }
            if requeued.count > 1 { metadata["push.requeued"] = "\(requeued.count)" }
            logger.error("\(what)", metadata: metadata)
        }
        if superseded > 0 {
            logger.info(
                "broker connection lost while the \(subject) was in flight; its redelivery takes over",
                metadata: superseded > 1 ? ["push.superseded": "\(superseded)"] : nil
            )
        }
    }
}
