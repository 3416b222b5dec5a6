public import PushCore
public import PushServiceKit
public import ServiceLifecycle

/// push-send's services, wired once for the executable and the tests: the batch consumer and what
/// it needs (the APNs client pool, made by `clientFactory` in tests that count connections).
/// The queues are `send.queuePrefix`'s.
public func buildPushSend(
    _ dependencies: ServiceDependencies, configuration: PushConfiguration, send: SendConfiguration, apps: AppsFile,
    clientFactory: APNsClientPool.Factory? = nil
) -> [any Service] {
    let queues = PushQueues(prefix: send.queuePrefix)
    return PushSendService(
        configuration: configuration, send: send, apps: apps, amqp: dependencies.amqp, redis: dependencies.redis, clientFactory: clientFactory,
        keyPrefix: dependencies.keyPrefix, crashGuard: dependencies.crashGuard(for: queues.send, in: queues), logger: dependencies.logger
    ).services
}
