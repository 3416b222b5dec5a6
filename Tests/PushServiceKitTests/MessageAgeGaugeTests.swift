import AMQP
import Foundation
import TestSupport
import Testing

@testable import PushServiceKit

/// `push_queue_message_age_seconds{queue}`: the age of the message a consumer took last, from its
/// AMQP timestamp, as `/metrics` shows it.
@Suite(.serialized) struct MessageAgeGaugeTests {
    @Test func theAgeIsNowMinusTheTimestampNeverNegativeAndAbsentWithoutOne() {
        #expect(MessageAgeGauge.age(timestamp: 1_000, now: 1_090.5) == 90.5)
        #expect(MessageAgeGauge.age(timestamp: 2_000, now: 1_990) == 0)
        #expect(MessageAgeGauge.age(timestamp: nil, now: 1_000) == nil)
        #expect(MessageAgeGauge.age(timestamp: 0, now: 1_000) == nil)
    }

    @Test func aConsumedMessageSetsItsQueuesGaugeAndOneWithoutATimestampLeavesIt() async throws {
        PushMetrics.bootstrap()
        let queue = "message-age-test-\(UUID().uuidString.prefix(8))"
        let topology = AMQPTopology(queues: [.init(name: queue, durable: false, autoDelete: true)])
        try await withAMQPConnection(name: "message-age-test", topology: topology) { connection in
            let now = UInt64(Date().timeIntervalSince1970)
            try await connection.publish(
                AMQPOutboundMessage(exchange: "", routingKey: queue, body: Array("old".utf8), properties: AMQPProperties(timestamp: now - 120)))
            try await connection.publish(AMQPOutboundMessage(exchange: "", routingKey: queue, body: Array("unstamped".utf8)))
            let consumer = connection.consume(queue: queue, prefetch: 10)
            var iterator = MessageAgeGauge.observing(consumer, now: { Double(now) }).makeAsyncIterator()
            for _ in 0..<2 {
                let delivery = try #require(try await iterator.next())
                delivery.ack()
            }
            consumer.cancel()
            let line = PushMetrics.exposition().split(separator: "\n").first { $0.hasPrefix("push_queue_message_age_seconds{queue=\"\(queue)\"}") }
            #expect(line.map(String.init) == "push_queue_message_age_seconds{queue=\"\(queue)\"} 120.0")
        }
    }
}
