public import AMQP
import Foundation
public import Logging
public import PushCore
public import Redis

/// What a service's builder (`buildPushIngest`, `buildPushRender`, `buildPushSend`,
/// `buildPushFeedback`) takes from outside: the broker and Redis connections, the queue names, the
/// Redis key prefix, the clock and the logger. The executables make it from their
/// ``PushServiceRuntime``; the tests make it from their test servers, with their own prefixes and
/// clock, so both wire a service the same way.
public struct ServiceDependencies: Sendable {
    public var amqp: AMQPConnection
    public var redis: RedisClient
    public var queues: PushQueues
    /// The part before `{<app>}` of every Redis key (tests use their own).
    public var keyPrefix: String
    /// The virtual shards of an app's new registry (`PUSH_REGISTRY_SHARDS`).
    public var registryShards: Int = 24
    /// How long request reports are kept (`PUSH_REPORT_TTL_S`).
    public var reportTTL: Duration = RequestReports.defaultTTL
    public var logger: Logger
    /// Milliseconds since 1970; tests move it.
    public var now: @Sendable () -> Int64

    public init(
        amqp: AMQPConnection, redis: RedisClient, queues: PushQueues = .standard, keyPrefix: String = "push", logger: Logger,
        now: @escaping @Sendable () -> Int64 = ServiceDependencies.wallClockMilliseconds
    ) {
        self.amqp = amqp
        self.redis = redis
        self.queues = queues
        self.keyPrefix = keyPrefix
        self.logger = logger
        self.now = now
    }

    /// A running service's: its runtime's connections, queues and logger, the wall clock.
    public init(_ runtime: PushServiceRuntime) {
        self.init(amqp: runtime.amqp, redis: runtime.redis, queues: runtime.queues, logger: runtime.logger)
        self.registryShards = runtime.configuration.registryShards
        self.reportTTL = runtime.configuration.reportTTL
    }

    /// The request reports, under this service's key prefix.
    public var reports: RequestReports { RequestReports(redis: redis, keyPrefix: keyPrefix, ttl: reportTTL) }

    /// The crash guard of a consumer of `queue` (``CrashGuard``), naming the service by the logger's
    /// label; dead letters go to `queues` (default: ``queues``).
    public func crashGuard(for queue: WorkQueue, in queues: PushQueues? = nil) -> CrashGuard {
        CrashGuard(
            service: logger.label, queue: queue, queues: queues ?? self.queues, redis: redis, keyPrefix: keyPrefix, amqp: amqp, logger: logger)
    }

    /// The wall clock in milliseconds since 1970.
    @Sendable public static func wallClockMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded())
    }
}
