public import AMQP
import Foundation
public import Logging
public import PushCore
import PushServiceKit
public import ServiceLifecycle
public import TokenRegistry

/// Consumes `push.registrations` (CONTRACT.md, "RabbitMQ topology") into the token registry.
///
/// Each message is a ``RegistrationMessage``: an upsert or a delete of one token. Outcomes (settled
/// by the service kit's ``PushServiceKit/DeliverySettler``):
/// - **valid** → the registry write; the delivery is acked only after Redis confirmed it;
/// - **Redis unavailable** (``RegistryError/isRetryable``) → retried: the original message goes to the
///   queue's delayed-retry tier (5 s, 60 s, then 10 min each time), and is dead-lettered once
///   ``PushServiceKit/DeliverySettler/maximumRetries`` are used up;
/// - **invalid** (not JSON, unknown app, bad token, bad field) or refused by the registry for good (a
///   corrupt stored record) → the original body and properties go to the dead queue with the reason,
///   naming the field, in ``PushCore/PushQueues/errorHeader``.
///
/// Deliveries are processed concurrently, at most `prefetch` at a time (which is also the broker's
/// prefetch, so the bound holds across reconnects too). On graceful shutdown the consumer stops taking
/// deliveries, finishes the ones in flight and returns; the connection is closed by the runtime after.
///
/// Processing order across messages is not kept: two messages for one token in flight together may be
/// written in either order (the registry stays consistent either way; the later write wins).
public struct RegistrationQueueConsumer: Service {
    private let amqp: AMQPConnection
    private let registry: TokenRegistry
    private let apps: AppsFile
    private let queues: PushQueues
    private let prefetch: UInt16
    private let settler: DeliverySettler
    private let logger: Logger
    private let now: @Sendable () -> Int64
    private let crashGuard: CrashGuard?

    /// - Parameters:
    ///   - prefetch: deliveries in flight at once (at least 1).
    ///   - crashGuard: finds a registration that crashes push-ingest (nil: unguarded).
    ///   - now: the clock for `updated_at`, ms since 1970.
    public init(
        amqp: AMQPConnection,
        registry: TokenRegistry,
        apps: AppsFile,
        queues: PushQueues = .standard,
        prefetch: UInt16 = 200,
        crashGuard: CrashGuard? = nil,
        logger: Logger,
        now: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
    ) {
        self.amqp = amqp
        self.crashGuard = crashGuard
        self.registry = registry
        self.apps = apps
        self.queues = queues
        self.prefetch = Swift.max(1, prefetch)
        self.settler = DeliverySettler(
            queue: queues.registrations, queues: queues, subject: "registration message", gaveUp: "token registry unavailable")
        self.logger = logger.consuming(queues.registrations)
        self.now = now
    }

    /// Stores registrations, `prefetch` at a time (``PushServiceKit/BoundedConsumer``), until graceful
    /// shutdown or cancellation; then finishes those in flight and returns.
    ///
    /// - Throws: when the broker cancels the consumer (the queue was deleted), after that drain.
    public func run() async throws {
        let consumer = amqp.consume(queue: queues.registrations.name, prefetch: prefetch)
        logger.info("consuming registrations", metadata: ["push.prefetch": "\(prefetch)"])
        let loop = BoundedConsumer(name: "registration consumer", bounds: .init(workers: Int(prefetch)), logger: logger, crashGuard: crashGuard)
        try await loop.run(consumer) { delivery in await self.process(delivery) }
    }

    // MARK: Processing one delivery

    /// Settles `delivery` exactly once; never throws.
    func process(_ delivery: AMQPDelivery) async {
        let message: RegistrationMessage
        let happenedAt: Int64
        do {
            let decoded = try RegistrationMessage.decode(body: delivery.body, apps: apps, now: now())
            message = decoded.message
            happenedAt = try RegistrationEventTime.resolve(decoded.registeredAt, now: now())
        } catch {
            logger.notice("invalid registration message", metadata: ["push.error": "\(error.message)"])
            await settler.settle(delivery, .deadLetter(reason: error.message), amqp: amqp, logger: logger)
            return
        }
        var logger = self.logger
        logger[metadataKey: "push.app"] = "\(message.app.bundleID)"
        logger[metadataKey: "push.token"] = "\(message.token.redacted)"
        logger[metadataKey: "push.op"] = "\(message.operationName)"
        await settler.settle(delivery, await store(message, at: happenedAt, logger: logger), amqp: amqp, logger: logger)
    }

    /// Writes `message`, which happened `at` (ms since 1970), to the registry unless the registry holds
    /// newer news of the token; what to do with its delivery.
    private func store(_ message: RegistrationMessage, at: Int64, logger: Logger) async -> DeliveryDisposition {
        do {
            switch message {
            case .upsert(let app, let token, let registration):
                let result = try await registry.upsert(
                    app: app.bundleID,
                    token: token,
                    registration: registration,
                    defaultEnvironment: app.environment,
                    now: at
                )
                if result.applied {
                    logger.debug("registered", metadata: ["push.created": "\(result.created)"])
                } else {
                    logger.info("ignored a registration older than what the registry holds", metadata: ["push.registered_at": "\(at)"])
                }
            case .delete(let app, let token):
                let removed = try await registry.delete(app: app.bundleID, token: token, at: at)
                logger.debug("unregistered", metadata: ["push.removed": "\(removed)"])
            case .upsertActivityToken(let app, let device, let registration):
                let result = try await registry.upsertActivityToken(
                    app: app.bundleID, device: device, registration: registration, defaultEnvironment: app.environment, now: at,
                    maxSlots: app.ingest.maxActivitySlots)
                if let cap = result.refusedAtCap { return .deadLetter(reason: "device: \(IngestError.slotCapMessage(cap))") }
                if result.applied {
                    logger.debug(
                        "Live Activity token registered", metadata: ["push.slot": "\(registration.slot.field)", "push.created": "\(result.created)"])
                } else {
                    logger.info(
                        "ignored a Live Activity token registration older than what the registry holds",
                        metadata: ["push.slot": "\(registration.slot.field)", "push.registered_at": "\(at)"])
                }
            case .deleteActivityToken(let app, let device, let slot):
                let removed = try await registry.deleteActivityToken(app: app.bundleID, device: device, slot: slot, at: at)
                logger.debug("Live Activity token unregistered", metadata: ["push.slot": "\(slot.field)", "push.removed": "\(removed)"])
            }
            return .ack
        } catch  where error.isRetryable {
            return .retry(reason: error.message)
        } catch {
            logger.error("registry refused a registration", metadata: ["push.error": "\(error.message)"])
            return .deadLetter(reason: error.message)
        }
    }
}
