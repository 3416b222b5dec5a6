import AMQP
import Foundation
import PushCore
import TestSupport
import Testing

@testable import PushServiceKit

/// `connection.blocked` as ops see it: `/readyz` and the metric (a private RabbitMQ under an alarm).
@Suite(.serialized, .timeLimit(.minutes(3))) struct BrokerBlockingTests {
    @Test func whileTheBrokerBlocksPublishingReadinessFailsSayingWhyAndTheMetricShowsIt() async throws {
        let broker = LocalServer(.rabbitmq, name: "blocked-test", port: 5782)
        try await broker.start()
        PushMetrics.bootstrap()
        var configuration = PushConfiguration(httpPort: 0, httpHost: "127.0.0.1")
        configuration.amqpURL = broker.url
        configuration.redisURL = TestServers.redisURL
        let runtime = try PushServiceRuntime(name: "blocked-test", configuration: configuration, logger: TestLogger.make("blocked-test"))
        let amqp = try #require(runtime.readinessChecks.first { $0.name == "amqp" })
        func metric() -> String {
            PushMetrics.exposition().split(separator: "\n")
                .first { $0.hasPrefix("push_amqp_publishing_blocked ") }.map(String.init) ?? "absent"
        }
        do {
            try await runtime.amqp.waitUntilConnected(timeout: .seconds(15))
            #expect(await amqp.run() == .ready)
            #expect(metric() == "push_amqp_publishing_blocked 0.0")
            // An alarm, and a publish: the broker blocks the publishing connection and says so.
            try await broker.rabbitmqctl(["-q", "set_vm_memory_high_watermark", "0.000001"])
            let publishing = Task {
                try await runtime.amqp.publish(
                    AMQPOutboundMessage(exchange: runtime.queues.exchange, routingKey: runtime.queues.requests.routingKey, body: Array("{}".utf8)))
            }
            try await eventually("readiness fails while blocked") {
                if case .notReady(let reason) = await amqp.run() { return reason.contains("blocks publishing") }
                return false
            }
            #expect(metric() == "push_amqp_publishing_blocked 1.0")
            try await broker.rabbitmqctl(["-q", "set_vm_memory_high_watermark", "0.4"])
            try await publishing.value
            try await eventually("ready again once unblocked") { await amqp.run() == .ready }
            #expect(metric() == "push_amqp_publishing_blocked 0.0")
            for queue in runtime.queues.allQueueNames { _ = try? await runtime.amqp.deleteQueue(queue) }
        } catch {
            await runtime.amqp.close()
            _ = try? await broker.rabbitmqctl(["-q", "set_vm_memory_high_watermark", "0.4"])
            try? await broker.stop()
            throw error
        }
        await runtime.amqp.close()
        try await broker.stop()
    }

}
