import AMQP
import PushCore
import PushServiceKit
import TestSupport
import Testing

/// Looking at push.dead returns the letters it took. RabbitMQ 4.0–4.2 counts every return as a
/// delivery and drops a quorum-queue message delivered more often than the queue's limit (20 by
/// default there): these tests run against whichever broker PUSH_TEST_AMQP_URL names, and
/// scripts/checks/rabbitmq4.sh runs them against RabbitMQ 4.
@Suite(.serialized) struct DeadLetterQueueTests {
    /// `count` letters in a push.dead of its own; `madeBefore`: that push.dead is first declared as
    /// an older version did (no delivery limit of its own: RabbitMQ 4's default applies).
    func withDeadLetters(
        _ count: Int, madeBefore: Bool = false, _ body: @Sendable (AMQPConnection, PushQueues) async throws -> Void
    ) async throws {
        let names = PushQueues(prefix: TestServers.uniqueName("dead-looks"))
        if madeBefore {
            try await withAMQPConnection(
                name: "dead-looks-old", topology: AMQPTopology(queues: [.init(name: names.dead, arguments: ["x-queue-type": "quorum"])])
            ) { _ in }
        }
        try await withAMQPConnection(name: "dead-looks", topology: .push(names)) { connection in
            for index in 0..<count {
                try await connection.publish(
                    AMQPOutboundMessage(
                        exchange: names.exchange, routingKey: names.deadRoutingKey, body: Array(#"{"id":"letter-\#(index)","app":"a"}"#.utf8),
                        properties: AMQPProperties(headers: [PushQueues.errorHeader: .string("test: dead by hand")], persistent: true)))
            }
            try await body(connection, names)
            for queue in names.allQueueNames { _ = try? await connection.deleteQueue(queue) }
        }
    }

    /// Thirty looks, more than RabbitMQ 4's default limit of 20: every letter is still there, with
    /// the key it had at the first look.
    @Test func lookingAtTheLettersManyTimesLosesNone() async throws {
        try await withDeadLetters(3) { connection, names in
            let letters = DeadLetterQueue(amqp: connection, queues: names)
            let first = Set(try await letters.peek(limit: 10).map(\.key))
            #expect(first.count == 3)
            for look in 2...30 {
                let keys = Set(try await letters.peek(limit: 10).map(\.key))
                #expect(keys == first, "look \(look): \(keys.count) letters")
                if keys != first { break }
            }
            try await eventually("all three letters in push.dead") { try await connection.queueStatus(names.dead).messages == 3 }
        }
    }

    /// A push.dead made by an older version keeps its arguments (a creation argument cannot change
    /// them): on RabbitMQ 4 it has the default limit of 20, and renewing the letters is what keeps
    /// them.
    @Test func aPushDeadMadeBeforeKeepsItsLettersToo() async throws {
        try await withDeadLetters(2, madeBefore: true) { connection, names in
            let letters = DeadLetterQueue(amqp: connection, queues: names)
            for look in 1...30 {
                let count = try await letters.peek(limit: 10).count
                #expect(count == 2, "look \(look)")
                if count != 2 { break }
            }
            try await eventually("both letters in push.dead") { try await connection.queueStatus(names.dead).messages == 2 }
        }
    }

    /// A letter the broker has delivered renewalCount times is given back as a fresh copy: its count
    /// starts again, so no limit is reached however often it is looked at, and it keeps its key.
    @Test func aLetterLookedAtOftenIsRenewedWithItsKey() async throws {
        try await withDeadLetters(1) { connection, names in
            let letters = DeadLetterQueue(amqp: connection, queues: names)
            let key = try #require(try await letters.peek(limit: 1).first?.key)
            for _ in 0..<(DeadLetterQueue.renewalCount + 3) { _ = try await letters.peek(limit: 1) }
            let taken = try await letters.take(limit: 1)
            let delivery = try #require(taken.first)
            let count = delivery.properties.headers["x-delivery-count"]?.intValue ?? 0
            #expect(count < Int64(DeadLetterQueue.renewalCount), "renewed: the broker's count is \(count)")
            #expect(DeadLetter(delivery: delivery, queues: names).key == key)
            await letters.giveBack(delivery)
            try await eventually("the letter is back") { try await connection.queueStatus(names.dead).messages == 1 }
        }
    }
}
