import AMQP
import Foundation
import PushCore
import PushServiceKit
import Redis
import TestSupport
import Testing
import TokenRegistry

/// The built `pushctl` as an operator runs it, against the test broker and Redis.
@Suite("pushctl publish, token and dead")
struct PushctlTests {
    static let pushctl = TestServers.productsDirectory.appendingPathComponent("pushctl").path
    static let logger = TestLogger.make("pushctl-test")

    /// Runs pushctl with the test servers' URLs; its exit status and output.
    func pushctl(_ arguments: [String], stdin: String? = nil) async throws -> (status: Int32, output: String) {
        var command = [Self.pushctl] + arguments
        if let stdin {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("pushctl-\(UUID().uuidString)").path
            try Data(stdin.utf8).write(to: URL(fileURLWithPath: file))
            command = ["/bin/sh", "-c", "exec \"$0\" \"$@\" < \(file)"] + command
        }
        let child = try ChildProcess(command, environment: ["PUSH_AMQP_URL": TestServers.amqpURL, "PUSH_REDIS_URL": TestServers.redisURL])
        let status = await child.waitForExit()
        return (status, child.output)
    }

    /// `pushctl topology` prints, without a broker, exactly the topology the services declare:
    /// docs/asyncapi.yaml is checked against this output (scripts/checks/contract.sh).
    @Test func topologyPrintsWhatTheServicesDeclare() async throws {
        let printed = try await pushctl(["topology", "--prefix", "t9"])
        #expect(printed.status == 0, "\(printed.output)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(printed.output.utf8)) as? [String: Any])
        let declared = AMQPTopology.push(PushQueues(prefix: "t9"))
        let exchanges = (json["exchanges"] as? [[String: Any]] ?? []).map { "\($0["name"] ?? "") \($0["type"] ?? "")" }
        #expect(exchanges == declared.exchanges.map { "\($0.name) \($0.type)" })
        let queues = json["queues"] as? [[String: Any]] ?? []
        #expect(queues.map { $0["name"] as? String ?? "" } == declared.queues.map(\.name))
        let tier = try #require(queues.first { $0["name"] as? String == "t9.send.retry.15m" })
        #expect((tier["arguments"] as? [String: Any])?["x-message-ttl"] as? Int == 900_000)
        #expect((tier["arguments"] as? [String: Any])?["x-dead-letter-routing-key"] as? String == "t9.send")
        let bindings = (json["bindings"] as? [[String: Any]] ?? []).map { "\($0["exchange"] ?? "") \($0["routing_key"] ?? "") \($0["queue"] ?? "")" }
        #expect(bindings == declared.bindings.map { "\($0.exchange) \($0.routingKey) \($0.queue)" })
        #expect(try await pushctl(["topology", "--prefix", "no spaces"]).status != 0)
    }

    /// A connection with a private `push` topology (prefix) declared.
    func withTopology<T>(_ body: (AMQPConnection, PushQueues) async throws -> T) async throws -> T {
        let queues = PushQueues(prefix: TestServers.uniqueName("pushctl"))
        let connection = AMQPConnection(
            configuration: try AMQPConfiguration(url: TestServers.amqpURL, connectionName: "pushctl-tests"),
            topology: .push(queues), logger: Self.logger
        )
        do {
            try await connection.waitUntilConnected(timeout: .seconds(15))
            let result = try await body(connection, queues)
            for name in queues.allQueueNames { _ = try? await connection.deleteQueue(name) }
            await connection.close()
            return result
        } catch {
            for name in queues.allQueueNames { _ = try? await connection.deleteQueue(name) }
            await connection.close()
            throw error
        }
    }

    /// The next delivery of `queue` within 10 s.
    func next(_ connection: AMQPConnection, _ queue: String) async throws -> AMQPDelivery {
        let consumer = connection.consume(queue: queue, prefetch: 1)
        let task = Task { () -> AMQPDelivery? in
            for try await delivery in consumer { return delivery }
            return nil
        }
        let timeout = Task {
            try? await Task.sleep(for: .seconds(10))
            consumer.cancel()
        }
        defer { timeout.cancel() }
        let delivery = try await task.value
        consumer.cancel()
        return try #require(delivery, "nothing arrived on \(queue)")
    }

    @Test func publishPutsARequestOnTheBrokerWithAConfirm() async throws {
        try await withTopology { connection, queues in
            let request = #"{"id":"demo-1","app":"com.example.game","to":{"users":["alice"]},"payload":{"aps":{"alert":"Hi"}}}"#
            let published = try await pushctl(["publish", "--queue-prefix", queues.prefix, "-"], stdin: request)
            #expect(published.status == 0, "\(published.output)")
            #expect(published.output.contains("published 'demo-1'"))
            let delivery = try await next(connection, queues.requests.name)
            #expect(String(decoding: delivery.body, as: UTF8.self) == request)
            #expect(delivery.properties.persistent)
            #expect(delivery.properties.contentType == "application/json")
            delivery.ack()

            let notJSON = try await pushctl(["publish", "--queue-prefix", queues.prefix, "-"], stdin: "hello")
            #expect(notJSON.status != 0)
            #expect(notJSON.output.contains("is not a JSON object"))
        }
    }

    @Test func requestPrintsTheDeliveryReportOfAPublishedRequest() async throws {
        let app = TestServers.uniqueName("com.example.report")
        let redis = try await RedisClient.connect(configuration: try RedisConfiguration(url: TestServers.redisURL), logger: Self.logger)
        try await withTopology { _, queues in
            let request = #"{"id":"report-1","app":"\#(app)","to":{"all":true},"payload":{"aps":{"alert":"Hi"}}}"#
            #expect(try await pushctl(["publish", "--queue-prefix", queues.prefix, "-"], stdin: request).status == 0)
            let shown = try await pushctl(["request", "report-1", "--app", app, "--json"])
            #expect(shown.status == 0, "\(shown.output)")
            let report = try #require(try JSONSerialization.jsonObject(with: Data(shown.output.utf8)) as? [String: Any])
            #expect(report["state"] as? String == "queued" && report["id"] as? String == "report-1" && report["delivered"] as? Int == 0)
            let text = try await pushctl(["request", "report-1", "--app", app])
            #expect(text.output.contains("state:      queued"))
            let unknown = try await pushctl(["request", "nobody-sent-this", "--app", app])
            #expect(unknown.status == 1 && unknown.output.contains("no report of 'nobody-sent-this'"))
        }
        _ = try? await redis.deleteKeys(matching: "push:{\(app)}:*")
        await redis.close()
    }

    @Test func tokenShowAndDeleteWorkOnTheRegistry() async throws {
        let redis = try await RedisClient.connect(configuration: try RedisConfiguration(url: TestServers.redisURL), logger: Self.logger)
        let app = TestServers.uniqueName("com.example.pushctl")
        let token = try DeviceToken(normalizing: String(repeating: "7a", count: 32))
        _ = try await TokenRegistry(redis: redis).upsert(
            app: app, token: token, registration: DeviceRegistration(user: "alice", topics: ["news"]), defaultEnvironment: .sandbox,
            now: 1_700_000_000_000
        )
        let shown = try await pushctl(["token", "show", "--app", app, "--token", "<\(token.hex.prefix(8)) \(token.hex.dropFirst(8))>"])
        #expect(shown.status == 0, "\(shown.output)")
        let record = try #require(try JSONSerialization.jsonObject(with: Data(shown.output.utf8)) as? [String: Any])
        #expect(record["user"] as? String == "alice")

        let deleted = try await pushctl(["token", "delete", "--app", app, "--token", token.hex])
        #expect(deleted.status == 0, "\(deleted.output)")
        #expect(try await TokenRegistry(redis: redis).record(app: app, token: token) == nil)
        #expect(try await redis.execute("SCARD", "push:{\(app)}:user:alice") == .integer(0))

        #expect(try await pushctl(["token", "show", "--app", app, "--token", token.hex]).status == 1)
        #expect(try await pushctl(["token", "delete", "--app", app, "--token", token.hex]).status == 1)
        let bad = try await pushctl(["token", "show", "--app", app, "--token", "xyz"])
        #expect(bad.status != 0 && bad.status != 1)
        #expect(bad.output.contains("--token"))
        await redis.close()
    }

    @Test func deadLettersAreListedThenReplayed() async throws {
        try await withTopology { connection, queues in
            // One the service dead-lettered itself (reason header, no source queue)…
            try await connection.publish(
                AMQPOutboundMessage(
                    exchange: queues.exchange, routingKey: queues.deadRoutingKey, body: Array(#"{"id":"r1"}"#.utf8),
                    properties: AMQPProperties(headers: [PushQueues.errorHeader: .string("to: is required")])
                )
            )
            // …and one the broker dead-lettered from push.requests (a reject without requeue).
            try await connection.publish(
                AMQPOutboundMessage(exchange: queues.exchange, routingKey: queues.requests.routingKey, body: Array(#"{"id":"r2"}"#.utf8))
            )
            let rejected = try await next(connection, queues.requests.name)
            rejected.reject(requeue: false)
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await connection.queueStatus(queues.dead).messages == 2)

            let listed = try await pushctl(["dead", "list", "--queue-prefix", queues.prefix])
            #expect(listed.status == 0, "\(listed.output)")
            #expect(listed.output.contains("to: is required"))
            #expect(listed.output.contains(#"{"id":"r2"}"#))
            #expect(listed.output.contains("from:   \(queues.requests.name)"))
            #expect(listed.output.contains("reason: parked by RabbitMQ in \(queues.requests.name): rejected by a consumer without requeue"))
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await connection.queueStatus(queues.dead).messages == 2, "list leaves them in place")

            // Without --to only the broker's letter knows where it came from.
            let replayed = try await pushctl(["dead", "replay", "--queue-prefix", queues.prefix])
            #expect(replayed.status == 0, "\(replayed.output)")
            #expect(replayed.output.contains("replayed 1"))
            let back = try await next(connection, queues.requests.name)
            #expect(String(decoding: back.body, as: UTF8.self) == #"{"id":"r2"}"#)
            #expect(back.properties.headers["x-death"] == nil)
            back.ack()

            let refused = try await pushctl(["dead", "replay", "--queue-prefix", queues.prefix, "--to", "push.nowhere"])
            #expect(refused.status != 0)
            let forced = try await pushctl(["dead", "replay", "--queue-prefix", queues.prefix, "--to", queues.requests.name, "--matching", "to: is"])
            #expect(forced.output.contains("replayed 1"), "\(forced.output)")
            let fixed = try await next(connection, queues.requests.name)
            #expect(String(decoding: fixed.body, as: UTF8.self) == #"{"id":"r1"}"#)
            #expect(fixed.properties.headers[PushQueues.errorHeader] == nil)
            fixed.ack()
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await connection.queueStatus(queues.dead).messages == 0)
        }
    }

    /// A dead letter's body is anyone's bytes: `dead list` prints its control characters escaped,
    /// so it cannot clear the screen or recolour the operator's terminal.
    @Test func deadListEscapesControlCharacters() async throws {
        try await withTopology { connection, queues in
            let body = "{\"id\":\"x\u{1B}[2J\u{1B}]0;owned\u{07}\",\"note\":\"line\nbreak\u{9B}\"}"
            try await connection.publish(
                AMQPOutboundMessage(
                    exchange: queues.exchange, routingKey: queues.deadRoutingKey, body: Array(body.utf8),
                    properties: AMQPProperties(headers: [PushQueues.errorHeader: .string("test: \u{1B}[31mred")])))
            let listed = try await pushctl(["dead", "list", "--queue-prefix", queues.prefix])
            #expect(listed.status == 0, "\(listed.output)")
            #expect(!listed.output.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x9B })
            #expect(listed.output.contains(#"x\u{1B}[2J\u{1B}]0;owned\u{7}"#) && listed.output.contains(#"line\u{A}break\u{9B}"#))
            #expect(listed.output.contains(#"test: \u{1B}[31mred"#))
        }
    }
}
