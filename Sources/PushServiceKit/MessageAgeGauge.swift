public import AMQP
import Foundation
import Metrics

/// `push_queue_message_age_seconds{queue}`: how old the message a consumer took last was, from its
/// AMQP `timestamp` property (seconds since 1970; push-render and push-send set it on everything
/// they publish, `pushctl publish` too). A queue is first in, first out, so while a consumer takes
/// messages the one it takes is the queue's oldest: the gauge is the age of the oldest message
/// waiting, the figure that says a queue has fallen behind (its depth alone does not: 10,000
/// messages are a second's work for one queue and an hour's for another). Messages without a
/// timestamp leave it as it was. It moves only when a message is taken: a consumer that hangs while
/// connected leaves it at its last value (its queue's depth and `rate(...)` of the work done show that).
public struct MessageAgeGauge: AsyncSequence, Sendable {
    public typealias Element = AMQPDelivery

    let consumer: AMQPConsumer
    let gauge: Gauge
    let now: @Sendable () -> Double

    /// `consumer`'s deliveries, each recorded as it is taken.
    public static func observing(
        _ consumer: AMQPConsumer, now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) -> MessageAgeGauge {
        MessageAgeGauge(consumer: consumer, gauge: Gauge(label: "push_queue_message_age_seconds", dimensions: [("queue", consumer.queue)]), now: now)
    }

    /// The age to record for a message stamped `timestamp` at `now` (nil: no stamp). A clock
    /// slightly behind the publisher's gives 0, not a negative age.
    static func age(timestamp: UInt64?, now: Double) -> Double? {
        guard let timestamp, timestamp > 0 else { return nil }
        return Swift.max(0, now - Double(timestamp))
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AMQPConsumer.AsyncIterator
        let gauge: Gauge
        let now: @Sendable () -> Double

        public mutating func next() async throws -> AMQPDelivery? {
            guard let delivery = try await base.next() else { return nil }
            if let age = MessageAgeGauge.age(timestamp: delivery.properties.timestamp, now: now()) { gauge.record(age) }
            return delivery
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: consumer.makeAsyncIterator(), gauge: gauge, now: now)
    }
}
