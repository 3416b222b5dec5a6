public import PushCore
public import PushServiceKit
public import ServiceLifecycle

/// push-render's services, wired once for the executable and the tests: the `push.requests` consumer.
public func buildPushRender(
    _ dependencies: ServiceDependencies, configuration: RenderConfiguration, apps: AppsFile, catalogs: LocalizationCatalogs
) -> [any Service] {
    var configuration = configuration
    configuration.keyPrefix = dependencies.keyPrefix
    configuration.registryShards = dependencies.registryShards
    return [
        PushRequestConsumer(
            amqp: dependencies.amqp, redis: dependencies.redis, apps: apps, catalogs: catalogs, configuration: configuration,
            queues: dependencies.queues, crashGuard: dependencies.crashGuard(for: dependencies.queues.requests), logger: dependencies.logger,
            now: dependencies.now
        )
    ]
}
