public import PushCore
public import PushServiceKit
public import ServiceLifecycle
import TokenRegistry

/// push-feedback's services, wired once for the executable and the tests: the `push.feedback`
/// consumer, then the stale-token sweeper (graceful shutdown runs in reverse: the sweeper stops after
/// its current step, then the consumer drains).
public func buildPushFeedback(
    _ dependencies: ServiceDependencies, configuration: FeedbackConfiguration, apps: AppsFile, metrics: FeedbackMetrics = FeedbackMetrics()
) -> [any Service] {
    var configuration = configuration
    configuration.keyPrefix = dependencies.keyPrefix
    let registry = TokenRegistry(
        redis: dependencies.redis, keyPrefix: dependencies.keyPrefix,
        layouts: RegistryLayouts(redis: dependencies.redis, keyPrefix: dependencies.keyPrefix, defaultShards: dependencies.registryShards))
    let consumer = FeedbackQueueConsumer(
        amqp: dependencies.amqp, registry: registry, apps: apps, queues: dependencies.queues, configuration: configuration, metrics: metrics,
        crashGuard: dependencies.crashGuard(for: dependencies.queues.feedback), reports: dependencies.reports, logger: dependencies.logger,
        now: dependencies.now
    )
    let sweeper = StaleTokenSweeper(
        remover: TokenRemover(
            registry: registry, amqp: dependencies.amqp, queues: dependencies.queues, noteLifetime: configuration.removalNoteLifetime,
            metrics: metrics
        ),
        redis: dependencies.redis, apps: apps.bundleIDs, configuration: configuration, logger: dependencies.logger, now: dependencies.now
    )
    return [consumer, sweeper]
}
