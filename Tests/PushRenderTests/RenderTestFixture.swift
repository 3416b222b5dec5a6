import AMQP
import Foundation
import PushCore
import PushServiceKit
import Redis
import ServiceLifecycle
import TestSupport
import Testing
import TokenRegistry

@testable import PushRender

let renderTestLogger = TestLogger.make("render-tests")

/// A fresh push topology (own queue prefix), app and Redis key prefix against the shared test
/// RabbitMQ and Redis; everything is removed at the end.
struct RenderFixture: Sendable {
    let names: PushQueues
    let app: String
    let apps: AppsFile
    let keyPrefix: String
    let amqp: AMQPConnection
    let redis: RedisClient
    let registry: TokenRegistry
    let catalogs: LocalizationCatalogs
    var configuration: RenderConfiguration

    /// The keys of `token`'s shard (the registry's default layout).
    func keys(_ token: DeviceToken) async throws -> RegistryKeys { try await registry.keys(app: app, device: token) }

    func token(_ seed: Int, prefix: String = "f00d") -> DeviceToken {
        TestTokens.numbered(seed, prefix: prefix)
    }

    func register(_ token: DeviceToken, _ registration: DeviceRegistration) async throws {
        _ = try await registry.upsert(app: app, token: token, registration: registration, defaultEnvironment: .production, now: 1_000)
    }

    /// Writes `count` records straight into Redis with pipelines (the registry's layout: each in its
    /// shard), all in `topic`.
    func registerMany(_ count: Int, topic: String, prefix: String = "beef") async throws -> [DeviceToken] {
        let layout = try await registry.layouts.state(app: app).target
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(count)
        var start = 0
        while start < count {
            var commands: [RedisCommand] = []
            var members: [RegistryKeys: [String]] = [:]
            for index in start..<min(count, start + 1000) {
                let token = self.token(index, prefix: prefix)
                let keys = layout.keys(prefix: keyPrefix, app: app, device: token)
                tokens.append(token)
                members[keys, default: []].append(token.hex)
                commands.append(
                    RedisCommand([
                        "HSET", keys.record(token), "environment", index % 3 == 0 ? "sandbox" : "production", "locale",
                        index % 2 == 0 ? "de-DE" : "en-US",
                        "topics", "[\"\(topic)\"]", "alert", "1", "badge", "1", "sound", index % 5 == 0 ? "0" : "1",
                        "registered_at", "1000", "updated_at", "1000",
                    ]))
            }
            for (keys, hexes) in members {
                var topicMembers = RedisCommand(["SADD", keys.topic(topic)])
                var allMembers = RedisCommand(["SADD", keys.tokens])
                for hex in hexes {
                    topicMembers.append(hex)
                    allMembers.append(hex)
                }
                commands.append(topicMembers)
                commands.append(allMembers)
            }
            for reply in try await redis.pipeline(commands) where reply.errorMessage != nil {
                throw TestFailure("filling Redis: \(reply)")
            }
            start += 1000
        }
        return tokens
    }

    func publish(_ body: String, headers: AMQPTable = [:], messageID: String? = nil) async throws {
        try await amqp.publish(
            AMQPOutboundMessage(
                exchange: names.exchange, routingKey: names.requests.routingKey, body: Array(body.utf8),
                properties: AMQPProperties(headers: headers, messageID: messageID)))
    }

    func consumer(configuration: RenderConfiguration? = nil) -> PushRequestConsumer {
        PushRequestConsumer(
            amqp: amqp, redis: redis, apps: apps, catalogs: catalogs, configuration: configuration ?? self.configuration, queues: names,
            logger: renderTestLogger, now: { 1_767_225_000_000 })
    }

    /// Runs push-render as the executable wires it (``buildPushRender``) while `body` runs, then shuts
    /// it down gracefully (failing if that takes > 15 s).
    func run(configuration: RenderConfiguration? = nil, _ body: (ServiceGroup) async throws -> Void) async throws {
        let dependencies = ServiceDependencies(
            amqp: amqp, redis: redis, queues: names, keyPrefix: keyPrefix, logger: renderTestLogger, now: { 1_767_225_000_000 })
        let services = buildPushRender(dependencies, configuration: configuration ?? self.configuration, apps: apps, catalogs: catalogs)
        try await withRunningServices(services, logger: renderTestLogger, shutdownWithin: .seconds(15), body)
    }

    /// The render progress store on this fixture's keys, as push-render makes it.
    func store(leaseDuration: Duration) -> RenderProgressStore {
        RenderProgressStore(redis: redis, keyPrefix: keyPrefix, progressTTL: .seconds(600), leaseDuration: leaseDuration)
    }

    /// A fan-out of `request` on this fixture's broker, Redis and configuration, with a fixed clock.
    func fanOut(_ request: PushRequest, store: RenderProgressStore) -> RequestFanOut {
        RequestFanOut(
            request: request, renderer: NotificationRenderer(request: request, catalogs: catalogs),
            dependencies: FanOutDependencies(
                amqp: amqp, redis: redis, queues: names, configuration: configuration, store: store,
                layouts: registry.layouts, metrics: RenderMetrics(), now: { 1_000 }),
            logger: renderTestLogger)
    }

    /// Takes `count` messages off `queue` (acking them), or fails after `timeout`.
    func receive(from queue: String, count: Int, timeout: Duration = .seconds(20)) async throws -> [AMQPDelivery] {
        try await amqp.receive(from: queue, count: count, timeout: timeout)
    }

    /// Every send batch now in `push.send`, decoded.
    func drainBatches() async throws -> [SendBatch] {
        let count = try await amqp.queueStatus(names.send.name).messages
        return try await receive(from: names.send.name, count: count).map { try JSONDecoder().decode(SendBatch.self, from: Data($0.body)) }
    }

    func progress(_ requestID: String) async throws -> [String: String] {
        let reply = try await redis.execute("HGETALL", "\(keyPrefix):{\(app)}:render:\(requestID)")
        var hash: [String: String] = [:]
        let fields = reply.array ?? []
        var index = 0
        while index + 1 < fields.count {
            hash[fields[index].string ?? ""] = fields[index + 1].string
            index += 2
        }
        return hash
    }

    /// Waits until the request's progress record says done (at most 20 s).
    func waitUntilDone(_ requestID: String) async throws {
        try await eventually("request \(requestID) is done", timeout: .seconds(20)) {
            try await progress(requestID)["state"] == "done"
        }
    }

    /// Waits until the request queue is empty and nothing is unacknowledged (the consumer holds nothing).
    func waitUntilRequestsSettled() async throws {
        try await eventually("push.requests is drained") {
            try await amqp.queueStatus(names.requests.name).messages == 0
        }
    }
}

func withRenderFixture(
    _ name: String, configuration: RenderConfiguration = RenderConfiguration(), _ body: (RenderFixture) async throws -> Void
) async throws {
    let names = PushQueues(prefix: TestServers.uniqueName("render-\(name)"))
    let app = TestServers.uniqueName("com.test.render-\(name)")
    let keyPrefix = TestServers.uniqueName("rt")
    let apps = try AppsFile(apps: [.test(app, environment: .sandbox)])
    let amqp = AMQPConnection(
        configuration: try AMQPConfiguration(url: TestServers.amqpURL, connectionName: "render-tests"), topology: .push(names),
        logger: renderTestLogger)
    let redis = try await TestServers.connectRedis(logger: renderTestLogger)
    var configuration = configuration
    configuration.keyPrefix = keyPrefix
    let catalogs = LocalizationCatalogs(catalogs: [
        "en": StringsCatalog(strings: [
            "GAME_PLAY_REQUEST_FORMAT": "%@ and %@ have invited you to play Monopoly", "SHIPPED_TITLE": "Your order has shipped",
        ]),
        "de": StringsCatalog(strings: ["GAME_PLAY_REQUEST_FORMAT": "%@ und %@ haben dich zu Monopoly eingeladen"]),
        "zh-Hant": StringsCatalog(strings: ["GAME_PLAY_REQUEST_FORMAT": "%@ 和 %@ 邀請你玩《地產大亨》"]),
    ])
    let fixture = RenderFixture(
        names: names, app: app, apps: apps, keyPrefix: keyPrefix, amqp: amqp, redis: redis,
        registry: TokenRegistry(redis: redis, keyPrefix: keyPrefix), catalogs: catalogs, configuration: configuration)
    try await withCleanUp {
        try await amqp.waitUntilConnected(timeout: .seconds(15))
        try await body(fixture)
    } cleanUp: {
        for queue in names.allQueueNames { _ = try? await amqp.deleteQueue(queue) }
        await amqp.close()
        try await redis.deleteKeys(matching: "\(keyPrefix):*")
        await redis.close()
    }
}
