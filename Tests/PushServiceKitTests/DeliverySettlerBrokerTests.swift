import AMQP
import Foundation
import PushCore
import TestSupport
import Testing

@testable import PushServiceKit

/// ``DeliverySettler`` carrying its decisions out against the shared test RabbitMQ
/// (`TestServers.amqpURL`; fails when it is not running). Each test declares its own `PushQueues`
/// prefix and deletes its queues at the end.
@Suite("Delivery settler against real RabbitMQ", .timeLimit(.minutes(2)))
struct DeliverySettlerBrokerTests {
    @Test func aBatchPublishesEverythingThenRequeuesAndAcksTheRestWithOneMultipleAck() async throws {
        try await withSettlerFixture("batch") { fixture in
            for index in 0..<4 { try await fixture.publish("message \(index)", messageID: "m-\(index)") }
            let consumer = fixture.amqp.consume(queue: fixture.names.registrations.name, prefetch: 10)
            var iterator = consumer.makeAsyncIterator()
            var deliveries: [AMQPDelivery] = []
            while deliveries.count < 4, let delivery = try await iterator.next() { deliveries.append(delivery) }

            let event = AMQPOutboundMessage(exchange: fixture.names.exchange, routingKey: "dead", body: Array("event".utf8))
            let settled = await fixture.settler.settle(
                deliveries,
                [.ackAfterPublishing([event]), .deadLetter(reason: "body: not JSON"), .retry(reason: "Redis down"), .requeue(after: .zero)],
                amqp: fixture.amqp, turn: SettlementTurn(after: nil), logger: settlerTestLogger
            )
            #expect(settled.allSatisfy { if case .settled = $0.outcome { true } else { false } })

            // Only the requeued one comes back; the multiple ack covered the other three.
            let again = try #require(try await iterator.next())
            #expect(again.redelivered && again.properties.messageID == "m-3")
            again.ack()
            consumer.cancel()

            let dead = try await fixture.amqp.receive(from: fixture.names.dead, count: 2, timeout: .seconds(10))
            let letter = try #require(dead.first { $0.properties.messageID == "m-1" })
            #expect(letter.properties.headers[PushQueues.errorHeader] == "body: not JSON")
            #expect(String(decoding: letter.body, as: UTF8.self) == "message 1")
            #expect(dead.contains { String(decoding: $0.body, as: UTF8.self) == "event" })
            let retried = try await fixture.amqp.receive(from: fixture.names.registrations.retryQueue(tier: 0), count: 1, timeout: .seconds(4))
            #expect(retried.first?.properties.messageID == "m-2")
            #expect(retried.first?.properties.headers[DeliverySettler.retriesHeader] == .int64(1))

            // Settled for good: once the channel closes, nothing unacked goes back to the queue.
            await fixture.amqp.close()
            #expect(
                try await withAMQPConnection(name: "settler-tests-admin") { try await $0.queueStatus(fixture.names.registrations.name).messages } == 0
            )
        }
    }

    @Test func nothingIsPublishedForADeliveryWhoseConnectionTheBrokerClosed() async throws {
        try await withSettlerFixture("closed") { fixture in
            try await fixture.publish("poison", messageID: "m-0")
            let consumer = fixture.amqp.consume(queue: fixture.names.registrations.name, prefetch: 1)
            var iterator = consumer.makeAsyncIterator()
            let delivery = try #require(try await iterator.next())
            #expect(try await TestServers.sharedBroker.closeConnections(matching: fixture.connectionName) >= 1)
            let deadline = ContinuousClock.now + .seconds(15)
            while delivery.isSettleable, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(!delivery.isSettleable)

            let settled = await fixture.settler.settle(delivery, .deadLetter(reason: "refused"), amqp: fixture.amqp, logger: settlerTestLogger)
            guard case .superseded = settled.outcome else {
                Issue.record("not superseded: \(settled.outcome)")
                return
            }
            // The consumer survives the reconnect and gets the message again; the dead queue nothing.
            let again = try #require(try await iterator.next())
            #expect(again.redelivered && again.properties.messageID == "m-0")
            again.ack()
            consumer.cancel()
            #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
        }
    }
}

extension DeliverySettlerBrokerTests {
    /// A message AMQP cannot carry (a property over 255 bytes) fails alone, and retrying cannot help:
    /// the delivery that led to it is dead-lettered with the reason instead of requeued again and again.
    @Test func aDeliveryWhoseOutcomeAMQPCannotCarryIsDeadLetteredNotRequeued() async throws {
        try await withSettlerFixture("unpublishable") { fixture in
            try await fixture.publish("message", messageID: "m-0")
            let consumer = fixture.amqp.consume(queue: fixture.names.registrations.name, prefetch: 1)
            var iterator = consumer.makeAsyncIterator()
            let delivery = try #require(try await iterator.next())
            var event = AMQPOutboundMessage(exchange: fixture.names.exchange, routingKey: "dead", body: Array("event".utf8))
            event.properties.messageID = String(repeating: "x", count: 300)
            let settled = await fixture.settler.settle(delivery, .ackAfterPublishing([event]), amqp: fixture.amqp, logger: settlerTestLogger)
            guard case .settled = settled.outcome, case .deadLetter(_, let reason, _) = settled.settlement else {
                Issue.record("not dead-lettered: \(settled.outcome), \(settled.settlement)")
                return
            }
            #expect(reason.contains("255"), "\(reason)")
            consumer.cancel()
            let dead = try await fixture.amqp.receive(from: fixture.names.dead, count: 1, timeout: .seconds(10))
            #expect(dead[0].properties.messageID == "m-0")
            #expect(dead[0].properties.headers[PushQueues.errorHeader]?.stringValue?.contains("cannot carry") == true)
            #expect(try await fixture.amqp.queueStatus(fixture.names.registrations.name).messages == 0)
            #expect(fixture.amqp.lastError == nil, "the connection never dropped")
        }
    }
}

// MARK: - Fixture

private let settlerTestLogger = TestLogger.make("settler-tests")

private struct SettlerFixture: Sendable {
    let names: PushQueues
    let connectionName: String
    let amqp: AMQPConnection
    var settler: DeliverySettler {
        DeliverySettler(queue: names.registrations, queues: names, subject: "registration message", gaveUp: "token registry unavailable")
    }

    func publish(_ body: String, messageID: String) async throws {
        let message = AMQPOutboundMessage(
            exchange: names.exchange, routingKey: names.registrations.routingKey, body: Array(body.utf8),
            properties: AMQPProperties(messageID: messageID))
        try await amqp.publish(message)
    }
}

/// Declares a fresh push topology on its own connection, runs `body`, then deletes the queues.
private func withSettlerFixture(_ name: String, _ body: (SettlerFixture) async throws -> Void) async throws {
    let names = PushQueues(prefix: TestServers.uniqueName("settler-\(name)"))
    let connectionName = TestServers.uniqueName("settler-tests-\(name)")
    let configuration = try AMQPConfiguration(url: TestServers.amqpURL, connectionName: connectionName)
    let amqp = AMQPConnection(configuration: configuration, topology: .push(names), logger: settlerTestLogger)
    try await withCleanUp {
        try await amqp.waitUntilConnected(timeout: .seconds(15))
        try await body(SettlerFixture(names: names, connectionName: connectionName, amqp: amqp))
    } cleanUp: {
        await amqp.close()
        try await withAMQPConnection(name: "settler-tests-admin") { connection in
            for queue in names.allQueueNames { _ = try? await connection.deleteQueue(queue) }
        }
    }
}
