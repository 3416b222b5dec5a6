public import AMQP
public import Logging
public import PushCore
public import PushServiceKit
public import Redis
public import ServiceLifecycle

/// push-send wired: the APNs client pool and the `push.send` consumer, in the order graceful
/// shutdown needs (the consumer drains first, then the clients close). The executable and the tests
/// build it the same way.
public struct PushSendService: Sendable {
    public let pool: APNsClientPool
    public let processor: SendBatchProcessor
    public let consumer: SendBatchConsumer
    public let pauses: AppPauses
    public let expiryWatch: CredentialExpiryWatch

    /// - Parameters:
    ///   - configuration: the shared settings (`PUSH_APNS_ENDPOINT`, `PUSH_APNS_CA_FILE`).
    ///   - clientFactory: makes the APNs client of an app and environment; by default the real
    ///     ``APNs/APNsClient`` with ``APNs/APNsClientConfiguration/forApp(_:environment:endpointOverride:caFile:send:)``.
    ///   - keyPrefix: the first part of push-send's Redis keys (dedupe marks, rate limits).
    ///   - crashGuard: finds a batch that crashes push-send (nil: unguarded).
    public init(
        configuration: PushConfiguration,
        send: SendConfiguration,
        apps: AppsFile,
        amqp: AMQPConnection,
        redis: any RedisCommandExecutor,
        clientFactory: APNsClientPool.Factory? = nil,
        keyPrefix: String = "push",
        crashGuard: CrashGuard? = nil,
        logger: Logger
    ) {
        let queues = PushQueues(prefix: send.queuePrefix)
        pool = APNsClientPool(factory: clientFactory ?? APNsClientPool.live(configuration: configuration, send: send, logger: logger))
        pauses = AppPauses()
        processor = SendBatchProcessor(
            amqp: amqp,
            apps: apps,
            clients: pool,
            ledger: DeliveryLedger(redis: redis, ttl: send.dedupeTTL, keyPrefix: keyPrefix),
            rateLimits: send.rateLimitsEnabled ? SendRateLimits(redis: redis, keyPrefix: keyPrefix) : nil,
            pauses: pauses,
            queues: queues,
            configuration: send,
            reports: RequestReports(redis: redis, keyPrefix: keyPrefix, ttl: configuration.reportTTL),
            pauseNotes: AppPauseNotes(redis: redis, keyPrefix: keyPrefix),
            logger: logger
        )
        consumer = SendBatchConsumer(
            amqp: amqp, processor: processor, queues: queues, configuration: send, crashGuard: crashGuard, logger: logger)
        expiryWatch = CredentialExpiryWatch(apps: apps, summaries: CredentialSummaries(redis: redis, keyPrefix: keyPrefix), logger: logger)
    }

    /// The services to run after the broker connection and Redis: the pool, the consumer, and the
    /// watch on certificate expiry.
    public var services: [any Service] { [pool, consumer, expiryWatch] }
}
