import AMQP
import Crypto
import Foundation
import Logging
import PushCore
import PushSend
import PushServiceKit
import Redis
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

/// push-send wired as the executable wires it (``PushSendService`` with real ``APNs/APNsClient``s),
/// against the shared test RabbitMQ and Redis and a private `apns-sandbox`. Each fixture has its own
/// queue prefix, app ids and sandbox, and removes its queues and Redis keys at the end.
final class SendServiceFixture: Sendable {
    let names: PushQueues
    /// The main app: token auth with ``SendTestKeys/key``.
    let app: String
    let apps: AppsFile
    let sandbox: SandboxProcess
    let amqp: AMQPConnection
    let redis: RedisClient
    let directory: URL
    let send: SendConfiguration
    /// A queue bound to every routing key of the events exchange.
    let eventsQueue: String
    /// Every event that arrived on ``eventsQueue`` (one consumer for the fixture's lifetime, on a
    /// connection of its own, so observing never disturbs push-send's connection).
    let eventLog = SendEventLog()

    init(
        names: PushQueues, app: String, apps: AppsFile, sandbox: SandboxProcess, amqp: AMQPConnection, redis: RedisClient, directory: URL,
        send: SendConfiguration
    ) {
        self.names = names
        self.app = app
        self.apps = apps
        self.sandbox = sandbox
        self.amqp = amqp
        self.redis = redis
        self.directory = directory
        self.send = send
        self.eventsQueue = "\(names.prefix).test-events"
    }

    var configuration: PushConfiguration {
        PushConfiguration(httpPort: 9102, apnsEndpoint: URL(string: sandbox.endpointURL)!, apnsCAFile: sandbox.caFile)
    }

    // MARK: Batches

    static func tokens(_ count: Int) -> [String] {
        (0..<count).map { _ in TestTokens.random() }
    }

    func batch(
        _ tokens: [String],
        app: String? = nil,
        requestID: String = UUID().uuidString,
        sequence: Int = 0,
        priority: Int = 10,
        expiration: Int64? = nil,
        payload: String = #"{"aps":{"alert":"hello"}}"#
    ) -> SendBatch {
        SendBatch(
            requestID: requestID, batchID: "\(requestID)/\(sequence)", app: app ?? self.app, environment: .production, pushType: "alert",
            priority: priority, expiration: expiration, payload: payload, tokens: tokens,
            createdAt: Int64(Date().timeIntervalSince1970 * 1000)
        )
    }

    func publish(_ batches: [SendBatch]) async throws {
        let encoder = JSONEncoder()
        let messages = try batches.map { batch in
            AMQPOutboundMessage(exchange: names.exchange, routingKey: names.send.routingKey, body: Array(try encoder.encode(batch)))
        }
        for start in stride(from: 0, to: messages.count, by: 100) {
            for result in await amqp.publish(Array(messages[start..<min(start + 100, messages.count)])) { try result.get() }
        }
    }

    func publish(_ batch: SendBatch) async throws {
        try await publish([batch])
    }

    // MARK: Running the service

    /// Runs push-send in a service group while `body` runs, then shuts it down gracefully (failing the
    /// test if that takes more than 30 s).
    func run(_ body: (ServiceGroup) async throws -> Void) async throws {
        let dependencies = ServiceDependencies(amqp: amqp, redis: redis, queues: PushQueues(prefix: send.queuePrefix), logger: sendTestLogger)
        let services = buildPushSend(dependencies, configuration: configuration, send: send, apps: apps)
        try await withRunningServices(services, logger: sendTestLogger, shutdownWithin: .seconds(30), body)
    }

    // MARK: Looking at the results

    /// Takes `count` messages off `queue` (acking them), or fails after `timeout`. Uses a connection
    /// of its own for each call.
    func receive(from queue: String, count: Int, timeout: Duration = .seconds(20)) async throws -> [AMQPDelivery] {
        try await withAMQPConnection(name: "push-send-tests-receive") { connection in
            try await connection.receive(from: queue, count: count, timeout: timeout)
        }
    }

    /// The next `count` events not taken yet.
    func events(_ count: Int, timeout: Duration = .seconds(20)) async throws -> [PushEvent] {
        var taken: [PushEvent] = []
        try await eventually("\(count) more events", timeout: timeout) {
            taken = eventLog.take(upTo: count)
            return taken.count == count
        }
        return taken
    }

    /// Events not taken yet, until their `delivered` counts reach `delivered`.
    func events(untilDelivered delivered: Int, timeout: Duration = .seconds(60)) async throws -> [PushEvent] {
        var taken: [PushEvent] = []
        try await eventually("\(delivered) notifications reported delivered", timeout: timeout) {
            taken = eventLog.take(untilDelivered: delivered)
            return !taken.isEmpty
        }
        return taken
    }

    func messages(in queue: String) async throws -> Int {
        try await amqp.queueStatus(queue).messages
    }

    /// The sandbox's `GET /stats`.
    func stats() async throws -> [String: Any] {
        try #require(try await sandbox.admin("GET", "/stats").json)
    }

    /// Accepted notifications (200s) the sandbox counted.
    func acceptedCount() async throws -> Int {
        number(try await stats()["delivered"]) ?? 0
    }

    /// How many times the sandbox accepted each token of `app`.
    func deliveriesByToken(app: String? = nil) async throws -> [String: Int] {
        let answer = try await sandbox.admin("GET", "/deliveries?app=\(app ?? self.app)")
        let deliveries = try #require(answer.json?["deliveries"] as? [[String: Any]], "\(answer.body.prefix(500))")
        var counts: [String: Int] = [:]
        for delivery in deliveries {
            if let token = delivery["token"] as? String { counts[token, default: 0] += 1 }
        }
        return counts
    }

    func setFault(_ json: String) async throws {
        let answer = try await sandbox.admin("PUT", "/faults", body: json)
        #expect(answer.status == 200, "\(answer)")
    }

    func setToken(_ token: String, _ json: String) async throws {
        let answer = try await sandbox.admin("PUT", "/tokens/\(token)", body: json)
        #expect(answer.status == 200, "\(answer)")
    }
}

/// Events as they arrive; tests take them in order.
final class SendEventLog: Sendable {
    private let state = Mutex<(events: [PushEvent], next: Int)>(([], 0))

    func append(_ event: PushEvent) {
        state.withLock { $0.events.append(event) }
    }

    /// The next `count` untaken events, or none (and nothing taken) if fewer arrived.
    func take(upTo count: Int) -> [PushEvent] {
        state.withLock { state in
            guard state.events.count - state.next >= count else { return [] }
            defer { state.next += count }
            return Array(state.events[state.next..<state.next + count])
        }
    }

    /// Every event not taken yet.
    func takeAll() -> [PushEvent] {
        state.withLock { state in
            defer { state.next = state.events.count }
            return Array(state.events[state.next...])
        }
    }

    /// The shortest run of untaken events whose `delivered` counts reach `delivered`, or none.
    func take(untilDelivered delivered: Int) -> [PushEvent] {
        state.withLock { state in
            var sum = 0
            for index in state.next..<state.events.count {
                if state.events[index].event == "delivered" { sum += state.events[index].count ?? 0 }
                if sum >= delivered {
                    defer { state.next = index + 1 }
                    return Array(state.events[state.next...index])
                }
            }
            return []
        }
    }
}

/// Starts a sandbox, declares a fresh topology and an events queue, makes the main app (plus
/// `extraApps`, given the fixture's directory), runs `body`, then removes queues and keys.
func withSendService(
    _ name: String,
    send: SendConfiguration = SendConfiguration(prefetch: 20, drainTimeout: .seconds(5)),
    sandboxArguments: (URL) throws -> [String] = { _ in [] },
    rateLimits: AppConfiguration.RateLimits = .init(perDevicePerHour: 1000, perAppPerSecond: 1_000_000),
    delivery: AppConfiguration.Delivery = .init(),
    extraApps: (URL) throws -> [AppConfiguration] = { _ in [] },
    _ body: (SendServiceFixture) async throws -> Void
) async throws {
    let names = PushQueues(prefix: TestServers.uniqueName("send-\(name)"))
    var send = send
    send.queuePrefix = names.prefix
    let app = TestServers.uniqueName("com.test.send-\(name)")
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("push-send-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let keyFile = try SendTestKeys.write(in: directory)
    let main = AppConfiguration(
        bundleID: app,
        apns: .token(.init(keyFile: keyFile, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")),
        rateLimits: rateLimits,
        delivery: delivery
    )
    let apps = try AppsFile(apps: [main] + extraApps(directory))
    let sandbox = try await SandboxProcess(arguments: try sandboxArguments(directory))
    let amqp = AMQPConnection(
        configuration: try AMQPConfiguration(url: TestServers.amqpURL, connectionName: "push-send-tests"),
        topology: .push(names),
        logger: sendTestLogger
    )
    let observer = AMQPConnection(
        configuration: try AMQPConfiguration(url: TestServers.amqpURL, connectionName: "push-send-tests-events"),
        logger: sendTestLogger
    )
    let redis = try await TestServers.connectRedis(logger: sendTestLogger)
    let fixture = SendServiceFixture(names: names, app: app, apps: apps, sandbox: sandbox, amqp: amqp, redis: redis, directory: directory, send: send)
    try await withCleanUp {
        try await amqp.waitUntilConnected(timeout: .seconds(15))
        try await amqp.declare(
            AMQPTopology(
                queues: [.init(name: fixture.eventsQueue, arguments: ["x-queue-type": "quorum"])],
                bindings: [.init(queue: fixture.eventsQueue, exchange: names.eventsExchange, routingKey: "#")]
            )
        )
        try await observer.waitUntilConnected(timeout: .seconds(15))
        let events = observer.consume(queue: fixture.eventsQueue, prefetch: 1000)
        let collecting = Task {
            for try await delivery in events {
                delivery.ack()
                if let event = try? JSONDecoder().decode(PushEvent.self, from: Data(delivery.body)) { fixture.eventLog.append(event) }
            }
        }
        defer { collecting.cancel() }
        try await body(fixture)
        events.cancel()
    } cleanUp: {
        await observer.close()
        for queue in names.allQueueNames + [fixture.eventsQueue] { _ = try? await amqp.deleteQueue(queue) }
        await amqp.close()
        for bundleID in apps.bundleIDs { _ = try? await redis.deleteKeys(matching: "push:{\(bundleID)}:*") }
        await redis.close()
        _ = await sandbox.terminate()
    }
}
