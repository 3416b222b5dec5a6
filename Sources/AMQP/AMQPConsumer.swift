import Synchronization

/// Deliveries from one queue; iterate it with `for try await delivery in consumer`.
public struct AMQPConsumer: AsyncSequence, Sendable {
    public typealias Element = AMQPDelivery

    let stream: AsyncThrowingStream<AMQPDelivery, any Error>
    let id: UInt64
    let core: ConnectionCore
    /// The queue consumed.
    public let queue: String

    public func makeAsyncIterator() -> AsyncThrowingStream<AMQPDelivery, any Error>.AsyncIterator {
        stream.makeAsyncIterator()
    }

    /// Stops new deliveries (`basic.cancel`) and ends the sequence. Deliveries already received can
    /// still be acked.
    public func cancel() {
        _ = core.enqueue(.cancel(consumer: id))
    }
}

/// One message delivered to a consumer. Settle it exactly once with ``ack(multiple:)``,
/// ``nack(requeue:multiple:)`` or ``reject(requeue:)``.
public struct AMQPDelivery: Sendable {
    public let body: [UInt8]
    public let properties: AMQPProperties
    public let exchange: String
    public let routingKey: String
    /// Whether the broker delivered this message before (to this or another consumer).
    public let redelivered: Bool
    public let deliveryTag: UInt64

    let channel: UInt16
    /// The connection session the delivery came from; settling it on a later session is impossible
    /// (the broker already requeued it), so such calls are ignored.
    let generation: UInt64
    let core: ConnectionCore

    /// Whether the broker delivered this message before: the AMQP flag, or a quorum queue's
    /// `x-delivery-count` (set on every return to the queue).
    public var isRedelivery: Bool {
        redelivered || (properties.headers["x-delivery-count"]?.intValue ?? 0) > 0
    }

    /// Whether the session this delivery came on is still up, so settling it still means something.
    /// False once that connection was lost: the broker has requeued the message and delivers it
    /// again, and whatever the holder would still do for it duplicates what the redelivery does.
    public var isSettleable: Bool { core.isSettleable(generation: generation, channel: channel) }

    /// Acknowledges this delivery (and, with `multiple`, every earlier one on its channel).
    public func ack(multiple: Bool = false) {
        _ = core.enqueue(.settle(.ack, generation: generation, channel: channel, tag: deliveryTag, multiple: multiple))
    }

    /// Negatively acknowledges; with `requeue: false` the queue dead-letters it (to `push.dead`).
    public func nack(requeue: Bool, multiple: Bool = false) {
        _ = core.enqueue(.settle(requeue ? .nackRequeue : .nackDrop, generation: generation, channel: channel, tag: deliveryTag, multiple: multiple))
    }

    /// Rejects this delivery; with `requeue: false` the queue dead-letters it.
    public func reject(requeue: Bool) {
        _ = core.enqueue(.settle(requeue ? .rejectRequeue : .rejectDrop, generation: generation, channel: channel, tag: deliveryTag, multiple: false))
    }
}
