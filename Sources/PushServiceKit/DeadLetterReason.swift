public import AMQP
public import PushCore

/// Why a message is in the dead-letter queue, from its headers: the reason a service gave
/// (``PushCore/PushQueues/errorHeader``), or else what RabbitMQ recorded when it parked the message
/// itself (`x-death`: over the delivery limit, rejected, expired, over the length limit).
public struct DeadLetterReason: Sendable, Equatable, CustomStringConvertible {
    /// The service's own reason, when a service dead-lettered the message.
    public var reason: String?
    /// RabbitMQ's record, when the broker dead-lettered it: the first `x-death` entry.
    public var death: Death?

    public struct Death: Sendable, Equatable {
        /// `delivery_limit`, `rejected`, `expired` or `maxlen`.
        public var reason: String
        public var queue: String?
        /// How often the message died this way in that queue.
        public var count: Int64?
    }

    public init(headers: AMQPTable) {
        reason = headers[PushQueues.errorHeader]?.stringValue
        if case .array(let deaths)? = headers["x-death"], case .table(let first)? = deaths.first, let why = first["reason"]?.stringValue {
            death = Death(reason: why, queue: first["queue"]?.stringValue, count: first["count"]?.intValue)
        }
    }

    public var description: String {
        if let reason { return reason }
        guard let death else { return "no reason recorded (neither \(PushQueues.errorHeader) nor x-death)" }
        let place = death.queue.map { " in \($0)" } ?? ""
        let meaning: String
        switch death.reason {
        case "delivery_limit":
            meaning = "delivered more often than the queue's delivery limit (\(PushQueues.deliveryLimit)): its consumer kept failing or dying on it"
        case "rejected": meaning = "rejected by a consumer without requeue"
        case "expired": meaning = "its time to live ran out"
        case "maxlen": meaning = "the queue was over its length limit"
        default: meaning = death.reason
        }
        return "parked by RabbitMQ\(place): \(meaning)"
    }
}
