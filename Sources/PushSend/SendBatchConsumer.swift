public import AMQP
public import Logging
public import PushCore
import PushServiceKit
public import ServiceLifecycle

/// Consumes `push.send` and hands each delivery to a ``SendBatchProcessor``.
///
/// At most ``SendConfiguration/prefetch`` batches are in flight (the broker's prefetch, so the bound
/// holds across reconnects); with batches of a few hundred tokens that keeps thousands of notifications
/// in flight. On graceful shutdown it stops taking deliveries, lets the batches in flight finish for up
/// to ``SendConfiguration/drainTimeout``, then cancels the rest, which return to the queue (nack with
/// requeue) after marking in Redis what APNs already accepted. Should the process die instead, the
/// broker requeues every unacked batch and the marks keep the duplicates few.
public struct SendBatchConsumer: Service {
    private let amqp: AMQPConnection
    private let processor: SendBatchProcessor
    private let queue: String
    private let prefetch: Int
    private let drainTimeout: Duration
    private let crashGuard: CrashGuard?
    private let logger: Logger

    public init(
        amqp: AMQPConnection, processor: SendBatchProcessor, queues: PushQueues, configuration: SendConfiguration, crashGuard: CrashGuard? = nil,
        logger: Logger
    ) {
        self.amqp = amqp
        self.processor = processor
        self.queue = queues.send.name
        self.prefetch = Swift.max(1, Swift.min(configuration.prefetch, Int(UInt16.max)))
        self.drainTimeout = configuration.drainTimeout
        self.crashGuard = crashGuard
        self.logger = logger.consuming(queues.send)
    }

    /// Consumes until graceful shutdown or cancellation, drains (bounded), and returns.
    ///
    /// - Throws: when the broker cancels the consumer (the queue was deleted), after draining.
    public func run() async throws {
        let consumer = amqp.consume(queue: queue, prefetch: UInt16(prefetch))
        logger.info("consuming send batches", metadata: ["push.prefetch": "\(prefetch)"])
        let processor = self.processor
        let loop = BoundedConsumer(
            name: "send batch consumer", bounds: .init(workers: prefetch, drainDeadline: drainTimeout), logger: logger,
            crashGuard: crashGuard)
        try await loop.run(consumer) { delivery in await processor.process(delivery) }
    }
}
