public import AMQP

/// What a queue consumer decided to do with one delivery. ``DeliverySettler`` turns it into broker
/// work (publishes, then ack or requeue), the same way for every consumer.
///
/// A value, so a consumer's decisions can be tested without a broker.
public enum DeliveryDisposition: Sendable {
    /// Done with it: ack.
    case ack
    /// Done with it once `messages` (outcome events, follow-up batches) are confirmed by the broker:
    /// publish them, then ack. Should a publish fail, the delivery is requeued after
    /// ``DeliverySettler/publishFailureBackoff`` and done again.
    case ackAfterPublishing([AMQPOutboundMessage])
    /// Worth another try later (a dependency is unavailable): a copy goes to the work queue's next
    /// delayed-retry tier, counted in ``DeliverySettler/retriesHeader``, then ack; never to a tier
    /// shorter than `atLeast` (APNs asked for a delay, or the app is paused). Dead-lettered instead
    /// once ``DeliverySettler/maximumRetries`` are used up, or when the header is not a retry count.
    case retry(reason: String, atLeast: Duration = .zero)
    /// Never processable (malformed, refused for good): the original body and properties go to the
    /// dead queue with `reason` in ``PushCore/PushQueues/errorHeader``, then ack.
    case deadLetter(reason: String)
    /// Back to the work queue (nack with requeue) after `delay`: interrupted by shutdown (`.zero`), or
    /// broker trouble (``DeliverySettler/publishFailureBackoff``, so a sick broker is not hammered).
    case requeue(after: Duration)
    /// Nothing at all: the connection the delivery came on is gone (``AMQP/AMQPDelivery/isSettleable``),
    /// so the broker delivers it again and that copy takes over; anything published for this one would
    /// repeat what the redelivery does.
    case abandon
}
