public import PushCore
public import PushServiceKit
import RateLimiting
public import ServiceLifecycle
import TokenRegistry

/// push-ingest's services, wired once for the executable and the tests: the `push.registrations`
/// consumer, then the HTTP application (last, so graceful shutdown stops the HTTP server first, then
/// the consumer drains).
public func buildPushIngest(
    _ dependencies: ServiceDependencies, configuration: PushConfiguration, ingest: IngestConfiguration, apps: AppsFile,
    readiness: [ReadinessCheck]
) -> [any Service] {
    let registry = TokenRegistry(
        redis: dependencies.redis, keyPrefix: dependencies.keyPrefix,
        layouts: RegistryLayouts(redis: dependencies.redis, keyPrefix: dependencies.keyPrefix, defaultShards: dependencies.registryShards))
    let consumer = RegistrationQueueConsumer(
        amqp: dependencies.amqp, registry: registry, apps: apps, queues: dependencies.queues,
        crashGuard: dependencies.crashGuard(for: dependencies.queues.registrations), logger: dependencies.logger, now: dependencies.now
    )
    let http = buildIngestApplication(
        configuration: configuration, ingest: ingest, apps: apps, registry: registry, rateLimiter: RateLimiter(redis: dependencies.redis),
        readiness: readiness, logger: dependencies.logger
    )
    return [consumer, http]
}
