public import AMQP
import Foundation
public import Logging
public import PushCore
public import ServiceLifecycle
public import TokenRegistry

/// Consumes `push.registrations` (CONTRACT.md, "RabbitMQ topology") into the token registry.
///
/// Each message is a ``RegistrationMessage``: an upsert or a delete of one token. Outcomes:
/// - **valid** → the registry write; the delivery is acked only after Redis confirmed it;
/// - **Redis unavailable** (``RegistryError/isRetryable``) → the original message is
///   republished to the queue's delayed-retry tier (5 s, 60 s, then 10 min each time, see
///   ``maximumRetries``), counted in the ``retriesHeader`` header, and acked once the broker confirmed
///   the copy; a message still failing after ``maximumRetries`` goes to the dead queue;
/// - **invalid** (not JSON, unknown app, bad token, bad field) or refused by the registry for good (a
///   corrupt stored record) → the original body and properties are published to the dead queue
///   (`push.dead`, through ``PushCore/PushQueues/exchange`` with ``PushCore/PushQueues/deadRoutingKey``)
///   with the reason, naming the field, in ``PushCore/PushQueues/errorHeader``; acked after the confirm.
///
/// When a publish to a retry tier or to the dead queue fails (broker trouble), the delivery is
/// requeued after ``publishFailureBackoff`` rather than at once, so a sick broker is not hammered;
/// the quorum queue's delivery limit bounds how often that can happen to one message.
///
/// Deliveries are processed concurrently, at most `prefetch` at a time (which is also the broker's
/// prefetch, so the bound holds across reconnects too). On graceful shutdown the consumer stops taking
/// deliveries, finishes the ones in flight and returns; the connection is closed by the runtime after.
///
/// Processing order across messages is not kept: two messages for one token in flight together may be
/// written in either order (the registry stays consistent either way; the later write wins).
public struct RegistrationQueueConsumer: Service {
    /// Header counting how often a message went through a retry tier.
    public static let retriesHeader = "x-push-retries"
    /// Retry-tier passes before a message that keeps meeting an unavailable Redis is dead-lettered:
    /// 5 s + 60 s + 8 × 10 min ≈ 81 minutes of outage survived without an operator.
    public static let maximumRetries = 10
    /// The pause before requeueing a delivery whose retry or dead-letter publish failed.
    public static let publishFailureBackoff: Duration = .seconds(1)

    private let amqp: AMQPConnection
    private let registry: TokenRegistry
    private let apps: AppsFile
    private let queues: PushQueues
    private let prefetch: UInt16
    private let logger: Logger
    private let now: @Sendable () -> Int64

    /// - Parameters:
    ///   - prefetch: deliveries in flight at once (at least 1).
    ///   - now: the clock for `updated_at`, ms since 1970.
    public init(
        amqp: AMQPConnection,
        registry: TokenRegistry,
        apps: AppsFile,
        queues: PushQueues = .standard,
        prefetch: UInt16 = 200,
        logger: Logger,
        now: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
    ) {
        self.amqp = amqp
        self.registry = registry
        self.apps = apps
        self.queues = queues
        self.prefetch = Swift.max(1, prefetch)
        var logger = logger
        logger[metadataKey: "push.queue"] = "\(queues.registrations.name)"
        self.logger = logger
        self.now = now
    }

    /// Consumes until graceful shutdown or cancellation, then drains in-flight deliveries and returns.
    ///
    /// - Throws: when the broker cancels the consumer (the queue was deleted); in-flight deliveries are
    ///   finished first.
    public func run() async throws {
        let consumer = amqp.consume(queue: queues.registrations.name, prefetch: prefetch)
        logger.info("consuming registrations", metadata: ["push.prefetch": "\(prefetch)"])
        let limit = Int(prefetch)
        let failure: (any Error)? = await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                var inFlight = 0
                var failure: (any Error)?
                do {
                    for try await delivery in consumer {
                        if inFlight >= limit {
                            await group.next()
                            inFlight -= 1
                        }
                        group.addTask { await self.process(delivery) }
                        inFlight += 1
                    }
                } catch {
                    failure = error
                }
                await group.waitForAll()
                return failure
            }
        } onGracefulShutdown: {
            consumer.cancel()
        }
        if let failure {
            logger.error("registration consumer stopped", metadata: ["push.error": "\(failure)"])
            throw failure
        }
        logger.info("registration consumer drained")
    }

    // MARK: Processing one delivery

    /// Settles `delivery` exactly once; never throws.
    func process(_ delivery: AMQPDelivery) async {
        let message: RegistrationMessage
        do {
            message = try RegistrationMessage(body: delivery.body, apps: apps)
        } catch {
            logger.notice("invalid registration message", metadata: ["push.error": "\(error.message)"])
            await deadLetter(delivery, reason: error.message, logger: logger)
            return
        }
        var logger = self.logger
        logger[metadataKey: "push.app"] = "\(message.app.bundleID)"
        logger[metadataKey: "push.token"] = "\(message.token.redacted)"
        logger[metadataKey: "push.op"] = "\(message.operationName)"
        do {
            switch message {
            case .upsert(let app, let token, let registration):
                let result = try await registry.upsert(
                    app: app.bundleID,
                    token: token,
                    registration: registration,
                    defaultEnvironment: app.environment,
                    now: now()
                )
                logger.debug("registered", metadata: ["push.created": "\(result.created)"])
            case .delete(let app, let token):
                let existed = try await registry.delete(app: app.bundleID, token: token)
                logger.debug("unregistered", metadata: ["push.existed": "\(existed)"])
            }
            delivery.ack()
        } catch where error.isRetryable {
            await retryLater(delivery, error: error, logger: logger)
        } catch {
            logger.error("registry refused a registration", metadata: ["push.error": "\(error.message)"])
            await deadLetter(delivery, reason: error.message, logger: logger)
        }
    }

    /// Republishes to the next retry tier (or dead-letters after ``maximumRetries``), then acks.
    private func retryLater(_ delivery: AMQPDelivery, error: RegistryError, logger: Logger) async {
        let retries = Int(delivery.properties.headers[Self.retriesHeader]?.intValue ?? 0)
        guard let target = queues.registrations.retryQueue(afterRetries: retries, maximum: Self.maximumRetries) else {
            logger.error("registry unavailable; retries used up", metadata: ["push.error": "\(error.message)", "push.retries": "\(retries)"])
            await deadLetter(delivery, reason: "token registry unavailable after \(retries) retries: \(error.message)", logger: logger)
            return
        }
        var properties = delivery.properties
        properties.headers[Self.retriesHeader] = .int64(Int64(retries + 1))
        // Retry tiers dead-letter back to the work queue through the default exchange.
        let copy = AMQPOutboundMessage(exchange: "", routingKey: target, body: delivery.body, properties: properties)
        do {
            try await amqp.publish(copy)
            delivery.ack()
            logger.warning(
                "registry unavailable; registration scheduled for retry",
                metadata: ["push.error": "\(error.message)", "push.retry_queue": "\(target)", "push.retries": "\(retries + 1)"]
            )
        } catch let publishError {
            logger.error(
                "registry unavailable and the retry could not be published; requeueing",
                metadata: ["push.error": "\(error.message)", "push.amqp_error": "\(publishError)"]
            )
            await requeueAfterBackoff(delivery)
        }
    }

    /// Publishes the original body and properties to the dead queue with `reason`, then acks.
    private func deadLetter(_ delivery: AMQPDelivery, reason: String, logger: Logger) async {
        var properties = delivery.properties
        properties.headers[PushQueues.errorHeader] = .string(reason)
        let message = AMQPOutboundMessage(exchange: queues.exchange, routingKey: queues.deadRoutingKey, body: delivery.body, properties: properties)
        do {
            try await amqp.publish(message)
            delivery.ack()
        } catch {
            logger.error(
                "could not dead-letter a registration message; requeueing",
                metadata: ["push.error": "\(reason)", "push.amqp_error": "\(error)"]
            )
            await requeueAfterBackoff(delivery)
        }
    }

    /// Waits ``publishFailureBackoff`` (less if the task is cancelled), then requeues. If the connection
    /// dropped meanwhile the nack is ignored and the broker redelivers the message anyway.
    private func requeueAfterBackoff(_ delivery: AMQPDelivery) async {
        try? await Task.sleep(for: Self.publishFailureBackoff)
        delivery.nack(requeue: true)
    }
}
