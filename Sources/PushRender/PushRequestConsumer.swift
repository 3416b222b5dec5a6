public import AMQP
import Foundation
public import Logging
import Metrics
public import PushCore
import PushServiceKit
public import Redis
public import ServiceLifecycle
import Synchronization
import TokenRegistry

/// Consumes `push.requests` (CONTRACT.md, "Push request v1") and fans each request out into send
/// batches on `push.send` (``RequestFanOut``).
///
/// For each delivery:
/// - **invalid** (not JSON, a broken rule, an unknown app, a payload that cannot fit) → the original
///   body and properties go to `push.dead` with the reason (naming the field) in `x-push-error`;
///   acked after the broker confirmed the copy;
/// - **seen before** (its `id` is marked done in Redis) → acked, nothing sent;
/// - **another instance is on it** (its lease) or **Redis unavailable** → retried through the queue's
///   delayed-retry tier (5 s, 60 s, then 10 min; dead-lettered after
///   ``PushServiceKit/DeliverySettler/maximumRetries``);
/// - otherwise rendered and published round by round; acked once every batch is confirmed and the
///   request is marked done. A publish that fails (broker trouble) requeues the request after
///   ``PushServiceKit/DeliverySettler/publishFailureBackoff``; it resumes after its last confirmed round.
///
/// The service kit settles each of these (``PushServiceKit/DeliverySettler``).
///
/// At most ``RenderConfiguration/concurrency`` requests are in flight (also the broker prefetch). On
/// graceful shutdown the consumer stops taking deliveries; a request in the middle of its fan-out
/// stops after the round in flight is confirmed and saved, gives its lease up and is requeued, so
/// another instance (or this one after restart) resumes it where it stopped.
public struct PushRequestConsumer: Service {
    private let amqp: AMQPConnection
    private let redis: any RedisCommandExecutor
    private let apps: AppsFile
    private let catalogs: LocalizationCatalogs
    private let configuration: RenderConfiguration
    private let queues: PushQueues
    private let logger: Logger
    private let now: @Sendable () -> Int64
    private let metrics = RenderMetrics()
    private let stopping = StopSignal()
    /// This process's lease owner ids, one per claim.
    private let owners = LeaseOwners()
    private let requestLocks = KeyedLocks()
    private let settler: DeliverySettler
    private let crashGuard: CrashGuard?
    /// Each app's registry layout, read by every fan-out of this consumer.
    private let layouts: RegistryLayouts

    /// - Parameters:
    ///   - crashGuard: finds a request that crashes push-render (nil: unguarded).
    ///   - now: the clock for batch times and progress records, ms since 1970.
    public init(
        amqp: AMQPConnection,
        redis: any RedisCommandExecutor,
        apps: AppsFile,
        catalogs: LocalizationCatalogs,
        configuration: RenderConfiguration = RenderConfiguration(),
        queues: PushQueues = .standard,
        crashGuard: CrashGuard? = nil,
        logger: Logger,
        now: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
    ) {
        self.amqp = amqp
        self.redis = redis
        self.crashGuard = crashGuard
        self.apps = apps
        self.catalogs = catalogs
        self.configuration = configuration
        self.queues = queues
        self.logger = logger.consuming(queues.requests)
        self.now = now
        self.settler = DeliverySettler(queue: queues.requests, queues: queues, subject: "push request", gaveUp: "not rendered")
        self.layouts = RegistryLayouts(redis: redis, keyPrefix: configuration.keyPrefix, defaultShards: configuration.registryShards)
    }

    private var dependencies: FanOutDependencies {
        FanOutDependencies(
            amqp: amqp,
            redis: redis,
            queues: queues,
            configuration: configuration,
            store: RenderProgressStore(
                redis: redis, keyPrefix: configuration.keyPrefix, progressTTL: configuration.progressTTL, leaseDuration: configuration.leaseDuration),
            layouts: layouts,
            metrics: metrics,
            now: now
        )
    }

    /// Consumes until graceful shutdown or cancellation, then lets in-flight requests reach a round
    /// boundary and returns.
    public func run() async throws {
        let limit = max(1, configuration.concurrency)
        let consumer = amqp.consume(queue: queues.requests.name, prefetch: UInt16(limit))
        logger.info(
            "consuming push requests",
            metadata: [
                "push.concurrency": "\(limit)", "push.batch_size": "\(configuration.batchSize)",
                "push.catalogs": "\(catalogs.catalogs.keys.sorted())",
            ])
        let stopping = self.stopping
        let loop = BoundedConsumer(name: "push request consumer", bounds: .init(workers: limit), logger: logger, crashGuard: crashGuard)
        try await loop.run(consumer, onShutdown: { stopping.stop() }) { delivery in await self.process(delivery) }
    }

    // MARK: One delivery

    /// Settles `delivery` exactly once; never throws.
    func process(_ delivery: AMQPDelivery) async {
        let started = ContinuousClock.now
        let request: PushRequest
        let renderer: NotificationRenderer
        do throws(PushRequestError) {
            request = try PushRequest(body: delivery.body, apps: apps)
            renderer = NotificationRenderer(request: request, catalogs: catalogs)
            try renderer.preflight()
        } catch {
            logger.notice("invalid push request", metadata: ["push.error": "\(error.message)"])
            metrics.request("invalid")
            await noteDead(body: delivery.body, reason: error.message)
            await settler.settle(delivery, .deadLetter(reason: error.message), amqp: amqp, logger: logger)
            return
        }
        var logger = self.logger
        logger[metadataKey: "push.request_id"] = "\(request.id)"
        logger[metadataKey: "push.app"] = "\(request.app.bundleID)"
        // One copy of a request at a time here: after a dropped broker connection the redelivery
        // waits until the first copy stopped (between rounds) and saved where it got.
        let lockKey = "\(request.app.bundleID)\n\(request.id)"
        await requestLocks.lock(lockKey)
        let disposition = await render(delivery, request: request, renderer: renderer, started: started, logger: logger)
        let settled = await settler.settle(delivery, disposition, amqp: amqp, logger: logger)
        if settled.settlement.gaveUp {
            metrics.request("gave_up")
        } else if case (.retry, .settled) = (settled.settlement, settled.outcome) {
            metrics.request("retried")
        }
        requestLocks.unlock(lockKey)
    }

    /// Marks an invalid request's report `dead` with its reason, when the body names a configured app
    /// and a usable id (a report under an app nobody configured would only be litter). A failed write
    /// is logged; the dead letter itself carries the reason either way.
    private func noteDead(body: [UInt8], reason: String) async {
        guard let object = try? JSONValue.parse(body), let id = object["id"]?.stringValue, !id.isEmpty, id.count <= PushRequest.maximumIDLength,
            !id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }),
            let bundleID = object["app"]?.stringValue, let app = apps.app(bundleID: bundleID)
        else { return }
        let reports = RequestReports(redis: redis, keyPrefix: configuration.keyPrefix, ttl: configuration.progressTTL)
        do {
            try await reports.recordDead(app: app.bundleID, requestID: id, reason: reason, now: now())
        } catch {
            logger.warning("could not mark the request dead in its report", metadata: ["push.error": "\(error)"])
        }
    }

    /// Renders and publishes what is left of `request`; what to do with its delivery.
    private func render(
        _ delivery: AMQPDelivery, request: PushRequest, renderer: NotificationRenderer, started: ContinuousClock.Instant, logger: Logger
    ) async -> DeliveryDisposition {
        let dependencies = self.dependencies
        let owner = owners.next()
        let claim: RenderProgressStore.Claim
        do {
            claim = try await dependencies.store.claim(
                app: request.app.bundleID, requestID: request.id, owner: owner, instancePrefix: owners.prefix, now: now())
        } catch {
            return .retry(reason: "Redis unavailable: \(error.message)")
        }
        let progress: RenderProgress
        switch claim {
        case .done:
            logger.info("push request already rendered; not sending it again")
            metrics.request("duplicate")
            return .ack
        case .busy:
            return .retry(reason: "another push-render instance is rendering this request")
        case .claimed(let found):
            progress = found
        }
        if progress.position != nil {
            logger.info("resuming a push request", metadata: ["push.batches": "\(progress.sequence)", "push.tokens": "\(progress.tokens)"])
        }
        let fanOut = RequestFanOut(request: request, renderer: renderer, dependencies: dependencies, logger: logger)
        let stopping = self.stopping
        do {
            // Stop between rounds at shutdown, or when the broker connection dropped (the broker
            // delivers the request again, and that copy resumes where this one stopped).
            switch try await fanOut.run(from: progress, owner: owner, shouldStop: { stopping.isStopped || !delivery.isSettleable }) {
            case .finished(let totals):
                let fallbackKeys = fanOut.deviceFallbackKeys
                if !fallbackKeys.isEmpty {
                    logger.notice(
                        "no catalog had some localisation keys; they were left to the device", metadata: ["push.loc_keys": "\(fallbackKeys)"])
                }
                metrics.request("rendered")
                metrics.requestDuration.record(duration: ContinuousClock.now - started)
                logger.info(
                    "push request rendered",
                    metadata: [
                        "push.batches": "\(totals.sequence)", "push.tokens": "\(totals.tokens)", "push.skipped": "\(totals.skipped)",
                        "push.push_type": "\(request.pushType)", "push.duration": "\(ContinuousClock.now - started)",
                    ])
                return .ack
            case .stopped(let totals):
                logger.notice("stopping mid-request; it will resume after its last confirmed round", metadata: ["push.batches": "\(totals.sequence)"])
                try? await dependencies.store.release(app: request.app.bundleID, requestID: request.id, owner: owner)
                metrics.request("requeued")
                return .requeue(after: .zero)
            case .leaseLost:
                logger.warning("another instance took this request over; leaving it to that instance")
                return .ack
            }
        } catch {
            switch error {
            case .redis(let redisError):
                return .retry(reason: "Redis unavailable mid-request: \(redisError.message)")
            case .publish:
                logger.error("could not publish send batches; requeueing the request", metadata: ["push.error": "\(error.message)"])
                try? await dependencies.store.release(app: request.app.bundleID, requestID: request.id, owner: owner)
                metrics.request("requeued")
                return .requeue(after: DeliverySettler.publishFailureBackoff)
            }
        }
    }
}

/// Set once on graceful shutdown; fan-outs check it between rounds.
final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    func stop() { flag.store(true, ordering: .relaxed) }
    var isStopped: Bool { flag.load(ordering: .relaxed) }
}
