public import AMQP
import Foundation
public import Logging
import Metrics
public import PushCore
public import Redis
public import ServiceLifecycle

/// What every push service stands on: its configuration, logger, broker connection (with the push
/// topology declared), Redis client, and the admin listener whose `/readyz` reports on both.
///
/// Executables call ``bootstrap(name:defaultHTTPPort:)`` once, add their own services and call
/// ``run(services:)``; tests build it with ``init(name:configuration:logger:)`` instead.
public struct PushServiceRuntime: Sendable {
    public let name: String
    public let configuration: PushConfiguration
    public let logger: Logger
    public let amqp: AMQPConnection
    public let redis: RedisClient
    /// The RabbitMQ names the broker connection declares: the contract's (``PushQueues/standard``)
    /// unless a service runs under another prefix (tests, benchmarks).
    public let queues: PushQueues

    /// Builds the clients (they connect in the background once run). Throws when a URL is unusable.
    public init(name: String, configuration: PushConfiguration, logger: Logger, queues: PushQueues = .standard) throws {
        self.name = name
        self.configuration = configuration
        self.logger = logger
        self.queues = queues
        let host = ProcessInfo.processInfo.hostName
        let amqpConfiguration = try AMQPConfiguration(url: configuration.amqpURL, connectionName: "\(name)@\(host)")
        // Publishes on a connection of their own: under a memory or disk alarm the broker stops
        // reading a publishing connection, and the consumers' acks, which free the memory, must get through.
        let blocked = Gauge(label: "push_amqp_publishing_blocked")
        blocked.record(0)
        self.amqp = AMQPConnection(
            configuration: amqpConfiguration, topology: AMQPTopology.push(queues).quorumInitialGroupSize(configuration.amqpQuorumSize),
            logger: logger,
            publishing: .separate,
            onBlocked: { reason in blocked.record(reason == nil ? 0 : 1) })
        let redisConfiguration = try RedisConfiguration(url: configuration.redisURL)
        self.redis = RedisClient(configuration: redisConfiguration, logger: logger)
    }

    /// Loads configuration from the environment (and `PUSH_CONFIG_FILE`), sets up logging and
    /// metrics, and builds the runtime. Configuration errors name the key and stop the process.
    /// `queues` names the topology to declare (default: the contract's).
    public static func bootstrap(name: String, defaultHTTPPort: Int, queues: PushQueues = .standard) async throws -> PushServiceRuntime {
        let (configuration, logger) = try await configure(name: name, defaultHTTPPort: defaultHTTPPort)
        return try bootstrap(name: name, configuration: configuration, logger: logger, queues: queues)
    }

    /// The first half of ``bootstrap(name:defaultHTTPPort:queues:)``: loads the configuration and
    /// sets up logging and metrics, connecting to nothing. A service checks the rest of its
    /// configuration (the apps file, its own keys) between the two halves, so a bad file stops it
    /// before any connection exists and its error is the only thing it prints.
    public static func configure(name: String, defaultHTTPPort: Int) async throws -> (configuration: PushConfiguration, logger: Logger) {
        let configuration = try await PushConfiguration.load(defaults: PushConfiguration(httpPort: defaultHTTPPort))
        PushLogging.bootstrap(configuration)
        PushMetrics.bootstrap()
        var logger = Logger(label: name)
        logger.logLevel = configuration.logLevel
        return (configuration, logger)
    }

    /// The second half: builds the clients (which connect once run) and arms the crash notes.
    public static func bootstrap(
        name: String, configuration: PushConfiguration, logger: Logger, queues: PushQueues = .standard
    ) throws
        -> PushServiceRuntime
    {
        let runtime = try PushServiceRuntime(name: name, configuration: configuration, logger: logger, queues: queues)
        runtime.armCrashNotes(keyPrefix: ServiceDependencies(runtime).keyPrefix)
        return runtime
    }

    /// Has a crash of this process leave its note in Redis (``CrashRecorder``), which the consumers'
    /// ``CrashGuard`` reads; without it (an unresolvable Redis host) they run as if no process crashed.
    ///
    /// With a Redis Cluster the note goes to the master serving its key's slot: armed once the
    /// client knows the cluster's map, and armed again (within 5 s) when a failover moves the slot.
    public func armCrashNotes(keyPrefix: String) {
        guard redis.configuration.isCluster else {
            do {
                try CrashRecorder.arm(configuration: redis.configuration, keyPrefix: keyPrefix)
            } catch {
                logger.warning("crash notes unavailable", metadata: ["push.error": "\(error)"])
            }
            return
        }
        let key = CrashRecorder.key(keyPrefix: keyPrefix, instance: ProcessInstance.id)
        Task { [redis, logger] in
            var armed: RedisEndpoint?
            while !Task.isCancelled {
                if let master = redis.server(forKey: key), master != armed {
                    var node = redis.configuration
                    node.endpoint = master
                    node.clusterSeeds = []
                    do {
                        try CrashRecorder.arm(configuration: node, keyPrefix: keyPrefix)
                        armed = master
                    } catch {
                        logger.warning("crash notes unavailable", metadata: ["push.error": "\(error)"])
                        return
                    }
                }
                try? await Task.sleep(for: armed == nil ? .milliseconds(200) : .seconds(5))
            }
        }
    }

    /// `/readyz` is ready when the broker connections are up with the topology declared, the broker
    /// does not block publishing (`connection.blocked`: a memory or disk alarm; also the metric
    /// `push_amqp_publishing_blocked`), and every Redis connection is up; otherwise it names what is
    /// missing and the last error.
    public var readinessChecks: [ReadinessCheck] {
        let amqp = self.amqp
        let redis = self.redis
        return [
            ReadinessCheck("amqp") {
                if let reason = amqp.blockedReason { return .notReady("the broker blocks publishing (\(reason))") }
                return amqp.isConnected ? .ready : .notReady(amqp.lastError?.message ?? "connecting to \(amqp.configuration.endpointDescription)")
            },
            ReadinessCheck("redis") {
                redis.isConnected ? .ready : .notReady("not connected to \(redis.configuration)")
            },
        ]
    }

    /// Runs the admin listener, the broker connection, Redis and then `services` until SIGTERM or
    /// SIGINT. Shutdown goes in reverse: `services` drain first, then the clients close, and the
    /// admin listener stops last.
    public func run(services: [any Service]) async throws {
        let admin = buildAdminServer(configuration: configuration, readiness: readinessChecks, logger: logger)
        try await run(services: services, adminServer: admin)
    }

    /// Like ``run(services:)``, with the admin listener given: `nil` when one of `services` serves
    /// ``AdminRoutes`` itself (push-ingest answers `/healthz`, `/readyz` and `/metrics` on its API port;
    /// put that server last in `services` so graceful shutdown stops it first and its in-flight
    /// requests still find Redis).
    public func run(services: [any Service], adminServer: AdminServer?) async throws {
        logger.info("starting", metadata: ["push.service": "\(name)", "push.admin_port": "\(configuration.effectiveAdminPort)"])
        let amqp = self.amqp
        let redis = self.redis
        let gauges = DependencyGauges([.init("rabbitmq") { amqp.isConnected }, .init("redis") { redis.isConnected }])
        try await runService(
            services: [amqp, redis, gauges, RedisMemoryGauge(redis: redis)] + services,
            adminServer: adminServer,
            shutdownTimeout: configuration.shutdownTimeout,
            logger: logger
        )
    }
}
