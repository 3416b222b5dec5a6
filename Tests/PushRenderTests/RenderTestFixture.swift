import AMQP
import Foundation
import Logging
import PushCore
@testable import PushRender
import PushServiceKit
import Redis
import ServiceLifecycle
import Testing
import TestSupport
import TokenRegistry

let renderTestLogger: Logger = {
    if ProcessInfo.processInfo.environment["PUSH_TEST_LOG"] != nil {
        var logger = Logger(label: "render-tests")
        logger.logLevel = .debug
        return logger
    }
    return Logger(label: "render-tests", factory: { _ in SwiftLogNoOpLogHandler() })
}()

struct RenderTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

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

    var keys: RegistryKeys { registry.keys(app: app) }

    func token(_ seed: Int, prefix: String = "f00d") -> DeviceToken {
        let tail = String(seed, radix: 16)
        return try! DeviceToken(normalizing: prefix + String(repeating: "0", count: 64 - prefix.count - tail.count) + tail)
    }

    func register(_ token: DeviceToken, _ registration: DeviceRegistration) async throws {
        _ = try await registry.upsert(app: app, token: token, registration: registration, defaultEnvironment: .production, now: 1_000)
    }

    /// Writes `count` records straight into Redis with pipelines (the registry's layout), all in `topic`.
    func registerMany(_ count: Int, topic: String, prefix: String = "beef") async throws -> [DeviceToken] {
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(count)
        var start = 0
        while start < count {
            var commands: [RedisCommand] = []
            var topicMembers = RedisCommand(["SADD", keys.topic(topic)])
            var allMembers = RedisCommand(["SADD", keys.tokens])
            for index in start..<min(count, start + 1000) {
                let token = self.token(index, prefix: prefix)
                tokens.append(token)
                topicMembers.append(token.hex)
                allMembers.append(token.hex)
                commands.append(
                    RedisCommand([
                        "HSET", keys.record(token), "environment", index % 3 == 0 ? "sandbox" : "production", "locale", index % 2 == 0 ? "de-DE" : "en-US",
                        "topics", "[\"\(topic)\"]", "alert", "1", "badge", "1", "sound", index % 5 == 0 ? "0" : "1",
                        "registered_at", "1000", "updated_at", "1000",
                    ]))
            }
            commands.append(topicMembers)
            commands.append(allMembers)
            for reply in try await redis.pipeline(commands) where reply.errorMessage != nil {
                throw RenderTestFailure("filling Redis: \(reply)")
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

    /// Runs a consumer while `body` runs, then shuts it down gracefully (failing if that takes > 15 s).
    func run(configuration: RenderConfiguration? = nil, _ body: (ServiceGroup) async throws -> Void) async throws {
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [consumer(configuration: configuration)], gracefulShutdownSignals: [], logger: renderTestLogger))
        let running = Task { try await group.run() }
        do {
            try await body(group)
        } catch {
            await group.triggerGracefulShutdown()
            _ = await running.result
            throw error
        }
        await group.triggerGracefulShutdown()
        let started = ContinuousClock.now
        try await running.value
        #expect(ContinuousClock.now - started < .seconds(15), "the consumer took \(ContinuousClock.now - started) to stop")
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

/// Polls `condition` every 50 ms until it holds, for at most `timeout`; then fails.
func eventually(_ what: String, timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw RenderTestFailure("\(what): not true within \(timeout)")
}

func withRenderFixture(
    _ name: String, configuration: RenderConfiguration = RenderConfiguration(), _ body: (RenderFixture) async throws -> Void
) async throws {
    let names = PushQueues(prefix: TestServers.uniqueName("render-\(name)"))
    let app = TestServers.uniqueName("com.test.render-\(name)")
    let keyPrefix = TestServers.uniqueName("rt")
    let apps = try AppsFile(apps: [
        AppConfiguration(
            bundleID: app, environment: .sandbox,
            apns: .token(AppConfiguration.TokenKey(keyFile: "key.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")))
    ])
    let amqp = AMQPConnection(
        configuration: try AMQPConfiguration(url: TestServers.amqpURL, connectionName: "render-tests"), topology: .push(names), logger: renderTestLogger)
    let redis = try await RedisClient.connect(
        configuration: RedisConfiguration(url: TestServers.redisURL, source: "PUSH_TEST_REDIS_URL"), logger: renderTestLogger)
    var configuration = configuration
    configuration.keyPrefix = keyPrefix
    let catalogs = LocalizationCatalogs(catalogs: [
        "en": StringsCatalog(strings: ["GAME_PLAY_REQUEST_FORMAT": "%@ and %@ have invited you to play Monopoly", "SHIPPED_TITLE": "Your order has shipped"]),
        "de": StringsCatalog(strings: ["GAME_PLAY_REQUEST_FORMAT": "%@ und %@ haben dich zu Monopoly eingeladen"]),
        "zh-Hant": StringsCatalog(strings: ["GAME_PLAY_REQUEST_FORMAT": "%@ 和 %@ 邀請你玩《地產大亨》"]),
    ])
    let fixture = RenderFixture(
        names: names, app: app, apps: apps, keyPrefix: keyPrefix, amqp: amqp, redis: redis,
        registry: TokenRegistry(redis: redis, keyPrefix: keyPrefix), catalogs: catalogs, configuration: configuration)
    var failure: (any Error)?
    do {
        try await amqp.waitUntilConnected(timeout: .seconds(15))
        try await body(fixture)
    } catch {
        failure = error
    }
    for queue in names.allQueueNames { _ = try? await amqp.deleteQueue(queue) }
    await amqp.close()
    // Remove every key of the fixture's prefix.
    var cursor = "0"
    repeat {
        let reply = try await redis.execute("SCAN", cursor, "MATCH", "\(keyPrefix):*", "COUNT", "1000")
        cursor = reply.array?.first?.string ?? "0"
        let keys = reply.array?.last?.array?.compactMap(\.string) ?? []
        if !keys.isEmpty { _ = try await redis.execute(RedisCommand(["UNLINK"] + keys)) }
    } while cursor != "0"
    await redis.close()
    if let failure { throw failure }
}
