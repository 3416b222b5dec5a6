public import Logging
public import PushCore
public import PushServiceKit
public import ServiceLifecycle

/// push-console's services, wired once for the executable and the tests: the HTTP application.
public func buildPushConsole(
    _ dependencies: ServiceDependencies, configuration: PushConfiguration, console: ConsoleConfiguration, credentials: OperatorCredentials,
    sessionKeys: SessionKeys, apps: AppsFile, catalogs: LocalizationCatalogs, readiness: [ReadinessCheck],
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) throws -> [any Service] {
    let backend = ConsoleBackend(
        amqp: dependencies.amqp, redis: dependencies.redis, apps: apps, catalogs: catalogs, queues: dependencies.queues,
        keyPrefix: dependencies.keyPrefix, registryShards: dependencies.registryShards, reportTTL: dependencies.reportTTL,
        logger: dependencies.logger, now: dependencies.now)
    let sessions = ConsoleSessions(redis: dependencies.redis, keyPrefix: dependencies.keyPrefix, ttl: console.sessionTTL, keys: sessionKeys)
    return [
        try buildConsoleApplication(
            configuration: configuration, console: console, credentials: credentials, backend: backend, sessions: sessions, readiness: readiness,
            logger: dependencies.logger, onServerRunning: onServerRunning)
    ]
}
