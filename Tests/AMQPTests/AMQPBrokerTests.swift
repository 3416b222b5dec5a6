import AMQP
import Foundation
import PushCore
import PushServiceKit
import Synchronization
import TestSupport
import Testing

/// Against the shared RabbitMQ that `make test` starts.
@Suite struct AMQPBrokerTests {
    @Test func tenThousandPersistentMessagesArriveExactlyOnce() async throws {
        let queue = TestServers.uniqueName("amqp.bulk")
        let count = 10_000
        try await withAMQPConnection(name: "bulk") { connection in
            try await connection.declare(quorumQueue(queue))
            let consumer = connection.consume(queue: queue, prefetch: 500)

            let messages = (0..<count).map { message("m\($0)", to: queue) }
            let results = await connection.publish(messages)
            let failures = results.filter { if case .failure = $0 { true } else { false } }
            #expect(failures.isEmpty, "publishes failed: \(failures.prefix(3))")

            let (seen, duplicates) = try await within(.seconds(60), "consuming \(count) messages") { [consumer] in
                var seen = Set<String>()
                var duplicates = 0
                for try await delivery in consumer {
                    if !seen.insert(delivery.text).inserted { duplicates += 1 }
                    #expect(delivery.properties.persistent)
                    #expect(delivery.properties.contentType == "application/json")
                    delivery.ack()
                    if seen.count == count { break }
                }
                return (seen, duplicates)
            }
            consumer.cancel()
            #expect(seen.count == count)
            #expect(duplicates == 0)
            #expect(seen == Set((0..<count).map { "m\($0)" }))
            let status = try await connection.queueStatus(queue)
            #expect(status.messages == 0)
            try await connection.deleteQueue(queue)
        }
    }

    @Test func aConsumerCancelledThenStartedAgainOnOneConnectionKeepsTheConnection() async throws {
        let queue = TestServers.uniqueName("amqp.recancel")
        try await withAMQPConnection(name: "amqp-tests") { connection in
            try await connection.declare(quorumQueue(queue))
            for round in 0..<3 {
                try await connection.publish(message("round \(round)", to: queue))
                let consumer = connection.consume(queue: queue, prefetch: 10)
                var received: AMQPDelivery?
                for try await delivery in consumer {
                    received = delivery
                    break
                }
                let delivery = try #require(received)
                #expect(delivery.text == "round \(round)")
                delivery.ack()
                consumer.cancel()
            }
            // Still the first session: nothing dropped the connection along the way.
            #expect(connection.lastError == nil, "\(String(describing: connection.lastError))")
            #expect(try await connection.queueStatus(queue).messages == 0)
            try await connection.deleteQueue(queue)
        }
    }

    @Test func declaringThePushTopologyTwiceIsIdempotent() async throws {
        let names = PushQueues(prefix: TestServers.uniqueName("topo"))
        let topology = AMQPTopology.push(names)
        try await withAMQPConnection(name: "topology-1", topology: topology) { first in
            // A second connection declares everything again, and so does an explicit declare.
            try await withAMQPConnection(name: "topology-2", topology: topology) { second in
                try await second.declare(topology)
                #expect(second.isConnected)
            }
            for queue in names.allQueueNames {
                let status = try await first.queueStatus(queue)
                #expect(status.messages == 0, "\(queue)")
            }
            for queue in names.allQueueNames { try await first.deleteQueue(queue) }
        }
    }

    @Test func redeclaringWithOtherArgumentsNamesTheQueue() async throws {
        let queue = TestServers.uniqueName("amqp.mismatch")
        try await withAMQPConnection(name: "mismatch", topology: quorumQueue(queue)) { connection in
            let classic = AMQPTopology(queues: [AMQPTopology.Queue(name: queue, arguments: ["x-queue-type": "classic"])])
            await #expect {
                try await connection.declare(classic)
            } throws: { error in
                guard let error = error as? AMQPError else { return false }
                return error.code == .channelClosed && error.replyCode == 406 && error.message.contains(queue)
                    && error.message.contains("PRECONDITION_FAILED")
            }
            // The connection is still usable afterwards.
            try await connection.publish(message("after", to: queue))
            try await connection.deleteQueue(queue)
        }
    }

    @Test func aQueueThatExistsKeepsItsQuorumSizeAndOtherArgumentsAreStillChecked() async throws {
        let queue = TestServers.uniqueName("amqp.quorum-size")
        try await withAMQPConnection(name: "quorum-size", topology: quorumQueue(queue)) { connection in
            // Created without a size; declared again with one: not an error, RabbitMQ keeps its members.
            try await connection.declare(quorumQueue(queue).quorumInitialGroupSize(1))
            try await connection.publish(message("after a creation argument", to: queue))
            let status = try await connection.queueStatus(queue)
            #expect(status.messages == 1)
            // Another argument that differs is still refused, with the size given too.
            var other = quorumQueue(queue).quorumInitialGroupSize(1)
            other.queues[0].arguments["x-max-length"] = .int64(5)
            await #expect {
                try await connection.declare(other)
            } throws: { error in
                guard let error = error as? AMQPError else { return false }
                return error.code == .channelClosed && error.replyCode == 406 && error.message.contains("x-max-length")
            }
            try await connection.deleteQueue(queue)
        }
        // A new queue is created with the size.
        let fresh = TestServers.uniqueName("amqp.quorum-size-new")
        try await withAMQPConnection(name: "quorum-size-new", topology: quorumQueue(fresh).quorumInitialGroupSize(1)) { connection in
            try await connection.publish(message("into a new queue", to: fresh))
            #expect(try await connection.queueStatus(fresh).messages == 1)
            try await connection.deleteQueue(fresh)
        }
    }

    @Test func aRejectedMessageLandsInTheDeadLetterQueue() async throws {
        let names = PushQueues(prefix: TestServers.uniqueName("dlx"))
        try await withAMQPConnection(name: "dlx", topology: .push(names)) { connection in
            try await connection.publish(
                AMQPOutboundMessage(exchange: names.exchange, routingKey: names.requests.routingKey, body: Array(#"{"id":"poison"}"#.utf8))
            )
            let work = connection.consume(queue: names.requests.name, prefetch: 1)
            let rejected = try await within(.seconds(10), "receiving the work message") { [work] in
                for try await delivery in work {
                    delivery.reject(requeue: false)
                    return delivery.text
                }
                return ""
            }
            #expect(rejected == #"{"id":"poison"}"#)
            let dead = connection.consume(queue: names.dead, prefetch: 1)
            let deadLetter: AMQPDelivery? = try await within(.seconds(10), "receiving the dead letter") { [dead] () -> AMQPDelivery? in
                for try await delivery in dead {
                    delivery.ack()
                    return delivery
                }
                return nil
            }
            #expect(deadLetter?.text == #"{"id":"poison"}"#)
            // The broker records where it came from in x-death.
            #expect(deadLetter?.properties.headers["x-death"] != nil)
            for queue in names.allQueueNames { try await connection.deleteQueue(queue) }
        }
    }

    @Test func aRetryTierSendsTheMessageBackAfterItsDelay() async throws {
        let names = PushQueues(prefix: TestServers.uniqueName("retry"))
        try await withAMQPConnection(name: "retry", topology: .push(names)) { connection in
            let tier = names.send.retryQueues[0]
            #expect(tier.delay == .seconds(1))
            let work = connection.consume(queue: names.send.name, prefetch: 10)
            let sent = ContinuousClock.now
            try await connection.publish(message(#"{"batch":1}"#, to: tier.name))
            let (text, elapsed) = try await within(.seconds(15), "the retried message") { [work] in
                for try await delivery in work {
                    delivery.ack()
                    return (delivery.text, ContinuousClock.now - sent)
                }
                return ("", Duration.zero)
            }
            #expect(text == #"{"batch":1}"#)
            #expect(elapsed >= .milliseconds(900), "came back after \(elapsed)")
            #expect(elapsed < .seconds(8), "came back after \(elapsed)")
            for queue in names.allQueueNames { try await connection.deleteQueue(queue) }
        }
    }

    @Test func anUnroutableMandatoryPublishIsAnError() async throws {
        let names = PushQueues(prefix: TestServers.uniqueName("unroutable"))
        try await withAMQPConnection(name: "unroutable", topology: .push(names)) { connection in
            await #expect {
                try await connection.publish(AMQPOutboundMessage(exchange: names.exchange, routingKey: "nobody-listens", body: [1]))
            } throws: { error in
                guard let error = error as? AMQPError else { return false }
                return error.code == .unroutable && error.message.contains("nobody-listens") && error.message.contains("NO_ROUTE")
            }
            // Not mandatory: confirmed even though no queue takes it (events work this way).
            try await connection.publish(
                AMQPOutboundMessage(exchange: names.eventsExchange, routingKey: "delivered", body: [1], mandatory: false)
            )
            for queue in names.allQueueNames { try await connection.deleteQueue(queue) }
        }
    }

    @Test func aPublishTheBrokerRefusesIsNacked() async throws {
        // A quorum queue over its length limit with reject-publish overflow nacks publishes. (Quorum
        // queues apply the limit once they are over it, so the first nack may come one message late.)
        let queue = TestServers.uniqueName("amqp.full")
        let full = quorumQueue(queue, arguments: ["x-max-length": 1, "x-overflow": "reject-publish"])
        try await withAMQPConnection(name: "nack", topology: full) { connection in
            var accepted = 0
            var firstRefusal: AMQPError?
            for attempt in 0..<10 where firstRefusal == nil {
                do {
                    try await connection.publish(message("m\(attempt)", to: queue))
                    accepted += 1
                } catch {
                    firstRefusal = (error as? AMQPError) ?? AMQPError(.protocolError, "\(error)")
                }
            }
            #expect(firstRefusal?.code == .nacked, "\(String(describing: firstRefusal))")
            #expect((1...2).contains(accepted))
            // A batch: the broker nacks every one, reported one by one.
            let results = await connection.publish((0..<5).map { message("more \($0)", to: queue) })
            #expect(results.allSatisfy { if case .failure(let error) = $0 { error.code == .nacked } else { false } })
            #expect(try await connection.queueStatus(queue).messages == accepted)
            // The nacks make the connection publish on a fresh channel, whose confirms are numbered
            // from 1 again: a burst to another queue is confirmed publish by publish.
            let other = TestServers.uniqueName("amqp.after-nack")
            try await connection.declare(quorumQueue(other))
            let burst = await connection.publish((0..<500).map { message("after \($0)", to: other) })
            #expect(burst.allSatisfy { if case .success = $0 { true } else { false } })
            #expect(try await connection.queueStatus(other).messages == 500)
            try await connection.deleteQueue(other)
            try await connection.deleteQueue(queue)
        }
    }

    @Test func publishingToAMissingExchangeReportsTheBrokersReason() async throws {
        let queue = TestServers.uniqueName("amqp.after-404")
        try await withAMQPConnection(name: "missing-exchange", topology: quorumQueue(queue)) { connection in
            await #expect {
                try await connection.publish(AMQPOutboundMessage(exchange: "no-such-exchange", routingKey: "x", body: [1]))
            } throws: { error in
                guard let error = error as? AMQPError else { return false }
                return error.code == .channelClosed && error.replyCode == 404 && error.message.contains("no-such-exchange")
            }
            // The publish channel is reopened: later publishes go through.
            try await connection.publish(message("ok", to: queue))
            #expect(try await connection.queueStatus(queue).messages == 1)
            try await connection.deleteQueue(queue)
        }
    }

    @Test func multipleAckSettlesEverythingUpToTheTag() async throws {
        let queue = TestServers.uniqueName("amqp.multiple")
        try await withAMQPConnection(name: "multiple", topology: quorumQueue(queue)) { connection in
            let results = await connection.publish((0..<100).map { message("\($0)", to: queue) })
            #expect(results.allSatisfy { (try? $0.get()) != nil })
            let consumer = connection.consume(queue: queue, prefetch: 100)
            try await within(.seconds(10), "100 deliveries") { [consumer] in
                var received = 0
                for try await delivery in consumer {
                    received += 1
                    // One multiple ack for the first 50; the other 50 stay unacked.
                    if received == 50 { delivery.ack(multiple: true) }
                    if received == 100 { break }
                }
            }
            consumer.cancel()
        }
        // The consumer's connection is closed: what it did not ack is back in the queue (a passive
        // declare counts only ready messages, so counting on the open connection would see 0 either way).
        try await withAMQPConnection(name: "multiple-check") { connection in
            try await eventually("the 50 unacked messages are back") { try await connection.queueStatus(queue).messages == 50 }
            try await connection.deleteQueue(queue)
        }
    }

    @Test func nackWithRequeueRedelivers() async throws {
        let queue = TestServers.uniqueName("amqp.requeue")
        try await withAMQPConnection(name: "requeue", topology: quorumQueue(queue)) { connection in
            try await connection.publish(message("again", to: queue))
            let consumer = connection.consume(queue: queue, prefetch: 1)
            let flags = try await within(.seconds(10), "two deliveries") { [consumer] in
                var flags: [Bool] = []
                for try await delivery in consumer {
                    flags.append(delivery.redelivered)
                    if flags.count == 1 {
                        delivery.nack(requeue: true)
                    } else {
                        delivery.ack()
                        break
                    }
                }
                return flags
            }
            #expect(flags == [false, true])
            try await connection.deleteQueue(queue)
        }
    }

    @Test func theConnectionNameIsSentToTheBroker() async throws {
        // The login carries the name in its client properties: the broker finds the connection by it
        // (as operators do with rabbitmqctl).
        let name = TestServers.uniqueName("push-tests-name")
        try await withAMQPConnection(name: name) { connection in
            #expect(connection.isConnected)
            let closed = try await TestServers.sharedBroker.closeConnections(matching: name)
            #expect(closed == 1)
        }
        // A non-ASCII name is accepted at login too.
        try await withAMQPConnection(name: "push-tests ✓") { connection in
            #expect(connection.isConnected)
        }
    }
}
