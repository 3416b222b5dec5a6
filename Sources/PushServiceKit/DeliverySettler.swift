public import AMQP
import Foundation
public import PushCore

/// Settles the deliveries of one work queue: turns each ``DeliveryDisposition`` a consumer decided on
/// into what to publish (a retry-tier copy, a dead letter, outcome messages) and whether to ack or
/// requeue after. The decisions here are pure (``settlement(for:body:properties:now:)``,
/// ``SettlementPlan``); ``settle(_:_:amqp:logger:)`` carries them out.
///
/// The rules every consumer shares (CONTRACT.md, "RabbitMQ topology"):
/// - a **retry** republishes the original body and properties, with ``retriesHeader`` counting the
///   passes, to the retry tier `WorkQueue.retryQueue(afterRetries:maximum:atLeast:)` picks (the tiers' queue
///   TTL dead-letters it back to the work queue through the default exchange); the header's count
///   climbs the tiers and stays on the longest one; after ``maximumRetries`` passes, or when the
///   header is negative or not an integer (anyone could set it), the message is dead-lettered;
/// - a **dead letter** is the original body and properties, with the reason in
///   ``PushCore/PushQueues/errorHeader``, published to ``PushCore/PushQueues/deadRoutingKey`` on
///   ``PushCore/PushQueues/exchange``;
/// - a delivery is acked only after everything published for it was confirmed; when a publish
///   fails it is requeued after ``publishFailureBackoff`` instead, and done again;
/// - nothing is published for a delivery whose connection is gone: its redelivery does that work.
public struct DeliverySettler: Sendable {
    /// Header counting how often a message went through a retry tier; absent means never.
    public static let retriesHeader = "x-push-retries"
    /// Retry-tier passes before a message that keeps asking for a retry is dead-lettered: with the
    /// 5 s, 60 s and 10 min tiers, 5 s + 60 s + 8 × 10 min ≈ 81 minutes of outage survived without
    /// an operator.
    public static let maximumRetries = 10
    /// The pause before requeueing a delivery whose publishes failed (broker trouble), so a sick
    /// broker is not hammered; the quorum queue's delivery limit (``PushCore/PushQueues/deliveryLimit``)
    /// bounds how often that can happen to one message.
    public static let publishFailureBackoff: Duration = .seconds(1)

    /// The work queue whose retry tiers a retry goes to.
    public let queue: WorkQueue
    /// Where dead letters go (``PushCore/PushQueues/exchange``, ``PushCore/PushQueues/deadRoutingKey``).
    public let queues: PushQueues
    /// What one delivery is, for log lines: `registration message`, `push request`, ….
    public let subject: String
    /// How a dead letter whose retries are used up starts its reason: `<gaveUp> after N retries: <reason>`.
    public let gaveUp: String

    public init(queue: WorkQueue, queues: PushQueues, subject: String, gaveUp: String) {
        self.queue = queue
        self.queues = queues
        self.subject = subject
        self.gaveUp = gaveUp
    }

    // MARK: Decisions

    /// What settling a delivery with `body` and `properties` as `disposition` takes. `now` (seconds
    /// since 1970) stamps a retry with the time it is due back in its work queue (now plus its tier's
    /// delay), so `push_queue_message_age_seconds` counts the time it then waits there, not the
    /// planned wait in the tier.
    public func settlement(
        for disposition: DeliveryDisposition, body: [UInt8], properties: AMQPProperties, now: UInt64 = UInt64(Date().timeIntervalSince1970)
    ) -> DeliverySettlement {
        switch disposition {
        case .ack:
            return .publishThenAck([])
        case .ackAfterPublishing(let messages):
            return .publishThenAck(messages)
        case .deadLetter(let reason):
            return .deadLetter(deadLetter(body: body, properties: properties, reason: reason), reason: reason, gaveUp: false)
        case .requeue(let delay):
            return .requeue(after: delay)
        case .abandon:
            return .leave
        case .retry(let reason, let atLeast):
            guard let retries = Self.retries(in: properties.headers) else {
                let deadReason = "\(gaveUp): \(Self.retriesHeader) is not a retry count: \(reason)"
                return .deadLetter(deadLetter(body: body, properties: properties, reason: deadReason), reason: deadReason, gaveUp: true)
            }
            guard retries >= 0 else {
                let deadReason = "\(gaveUp): \(Self.retriesHeader) is \(retries), not a retry count (0 or more): \(reason)"
                return .deadLetter(deadLetter(body: body, properties: properties, reason: deadReason), reason: deadReason, gaveUp: true)
            }
            guard let target = queue.retryQueue(afterRetries: retries, maximum: Self.maximumRetries, atLeast: atLeast) else {
                let deadReason =
                    retries > Self.maximumRetries
                    ? "\(gaveUp): \(Self.retriesHeader) is \(retries), more than the \(Self.maximumRetries) retries a delivery gets: \(reason)"
                    : "\(gaveUp) after \(retries) retries: \(reason)"
                return .deadLetter(deadLetter(body: body, properties: properties, reason: deadReason), reason: deadReason, gaveUp: true)
            }
            var copy = properties
            copy.headers[Self.retriesHeader] = .int64(Int64(retries + 1))
            let tier = queue.retryTiers[WorkQueue.tier(afterRetries: retries, atLeast: atLeast, in: queue.retryTiers)]
            copy.timestamp = now + UInt64(Swift.max(0, tier.components.seconds))
            // Retry tiers dead-letter back to the work queue through the default exchange.
            let message = AMQPOutboundMessage(exchange: "", routingKey: target, body: body, properties: copy)
            return .retry(message, retries: retries + 1, reason: reason)
        }
    }

    /// The retry passes counted in `headers`: 0 without ``retriesHeader``, nil when the header is
    /// there but not an integer (a negative count is returned as is; the tier choice refuses it).
    public static func retries(in headers: AMQPTable) -> Int? {
        guard let value = headers[retriesHeader] else { return 0 }
        return value.intValue.map { Int(clamping: $0) }
    }

    /// The original body and properties, with `reason` in ``PushCore/PushQueues/errorHeader``, for the dead queue.
    public func deadLetter(body: [UInt8], properties: AMQPProperties, reason: String) -> AMQPOutboundMessage {
        var properties = properties
        properties.headers[PushQueues.errorHeader] = .string(reason)
        return AMQPOutboundMessage(exchange: queues.exchange, routingKey: queues.deadRoutingKey, body: body, properties: properties)
    }
}

/// What settling one delivery takes: messages to publish with confirms, then what to tell the broker.
public enum DeliverySettlement: Sendable {
    /// Publish these (none: ack at once), then ack.
    case publishThenAck([AMQPOutboundMessage])
    /// Publish this copy to a retry tier (its `retries`-th pass, for `reason`), then ack.
    case retry(AMQPOutboundMessage, retries: Int, reason: String)
    /// Publish this dead letter, then ack; `gaveUp` when a retry was asked for but none is left.
    case deadLetter(AMQPOutboundMessage, reason: String, gaveUp: Bool)
    /// Nack with requeue after the delay.
    case requeue(after: Duration)
    /// Neither publish nor settle: the redelivery takes over.
    case leave

    /// What to publish before the ack.
    public var messages: [AMQPOutboundMessage] {
        switch self {
        case .publishThenAck(let messages): messages
        case .retry(let message, _, _), .deadLetter(let message, _, _): [message]
        case .requeue, .leave: []
        }
    }

    /// Whether this dead-letters a delivery whose retries are used up.
    public var gaveUp: Bool {
        if case .deadLetter(_, _, let gaveUp) = self { return gaveUp }
        return false
    }

    /// What to tell the broker once the publishes are done: `publishFailed` requeues after the
    /// backoff; `settleable` false (the delivery's connection is gone) leaves anything that would
    /// have published alone.
    public func action(settleable: Bool, publishFailed: Bool) -> SettlementPlan.Action {
        switch self {
        case .requeue(let delay): return .requeue(after: delay)
        case .leave: return .leave
        case .publishThenAck, .retry, .deadLetter:
            if !settleable && !messages.isEmpty { return .leave }
            return publishFailed ? .requeue(after: DeliverySettler.publishFailureBackoff) : .ack
        }
    }
}

/// How a group of deliveries is settled with the broker once their publishes are done: requeues
/// first (each alone, after the longest delay asked for), then acks.
///
/// With `multipleAck` (a batch whose earlier batches are all settled, see ``SettlementTurn``) the acks
/// are one `multiple` ack on the last delivery to ack, which acks every earlier unsettled delivery on
/// the channel: the batch's others, as the requeues went first. A delivery left alone would be acked
/// by it too, so a batch with one falls back to one ack each.
public struct SettlementPlan: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        case ack
        case requeue(after: Duration)
        case leave
    }

    /// Indices to nack with requeue, in order.
    public var requeue: [Int] = []
    /// How long to wait before those nacks.
    public var requeueDelay: Duration = .zero
    /// Indices to ack one by one.
    public var ack: [Int] = []
    /// The index to ack with `multiple`, covering every other index in ``ack``'s place.
    public var ackThrough: Int?

    public init(_ actions: [Action], multipleAck: Bool) {
        for (index, action) in actions.enumerated() {
            switch action {
            case .ack: ack.append(index)
            case .requeue(let delay):
                requeue.append(index)
                requeueDelay = Swift.max(requeueDelay, delay)
            case .leave: break
            }
        }
        if multipleAck, let last = ack.last, !actions.contains(.leave) {
            ack = []
            ackThrough = last
        }
    }
}
