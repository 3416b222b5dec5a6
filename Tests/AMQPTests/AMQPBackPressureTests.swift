import AMQP
import Foundation
import Synchronization
import TestSupport
import Testing

/// Broker back-pressure without deadlock: channels the broker closes, and a memory alarm that the
/// backlog itself raises (a private RabbitMQ whose watermark sits just above its memory at the start).
@Suite(.serialized, .timeLimit(.minutes(5))) struct AMQPBackPressureTests {
    @Test func anAckTheBrokerRefusesClosesOnlyItsChannelAndTheConsumerGoesOnOnANewOne() async throws {
        let queue = TestServers.uniqueName("amqp.refused-ack")
        try await withAMQPConnection(name: "refused-ack") { connection in
            try await connection.declare(quorumQueue(queue))
            try await connection.publish(message("first", to: queue))
            try await connection.publish(message("second", to: queue))
            let consumer = connection.consume(queue: queue, prefetch: 10)
            let received = try await within(.seconds(30), "the first deliveries and the redelivery") { [consumer] in
                var received: [AMQPDelivery] = []
                for try await delivery in consumer {
                    received.append(delivery)
                    if received.count == 2 {
                        // An ack the broker refuses: the tag was already acked (406 unknown delivery tag).
                        received[0].ack()
                        received[0].ack()
                    }
                    if received.count == 3 { break }
                }
                return received
            }
            // The unacked message comes back on the consumer's new channel; the old copy can no longer
            // be settled, and settling it anyway must not take the connection down.
            #expect(received[2].text == "second")
            #expect(received[2].redelivered)
            #expect(!received[1].isSettleable)
            #expect(received[2].isSettleable)
            received[1].ack()
            received[2].ack()
            try await Task.sleep(for: .milliseconds(300))
            #expect(connection.isConnected)
            #expect(connection.lastError == nil, "the connection never dropped: \(connection.lastError.map { "\($0)" } ?? "")")
            #expect(try await connection.queueStatus(queue).messages == 0)
            consumer.cancel()
            try await connection.deleteQueue(queue)
        }
    }

    @Test func aMessageAMQPCannotEncodeFailsAloneAndTheConnectionStays() async throws {
        let queue = TestServers.uniqueName("amqp.too-long")
        try await withAMQPConnection(name: "too-long") { connection in
            try await connection.declare(quorumQueue(queue))
            var bad = message("bad", to: queue)
            bad.properties.messageID = String(repeating: "é", count: 200)  // 400 bytes
            var badHeader = message("bad header", to: queue)
            badHeader.properties.headers = [String(repeating: "k", count: 256): "v"]
            let results = await connection.publish([message("before", to: queue), bad, badHeader, message("after", to: queue)])
            #expect((try? results[0].get()) != nil)
            for result in results[1...2] {
                #expect(throws: AMQPError.self) { try result.get() }
                if case .failure(let error) = result { #expect(error.code == .invalidMessage && error.message.contains("255"), "\(error)") }
            }
            #expect((try? results[3].get()) != nil)
            #expect(connection.lastError == nil, "the connection never dropped")
            #expect(try await connection.queueStatus(queue).messages == 2)
            try await connection.deleteQueue(queue)
        }
    }

    @Test func aMemoryAlarmTheBacklogRaisesBlocksPublishingOnlyAndClearsAsTheConsumerAcks() async throws {
        let broker = LocalServer(.rabbitmq, name: "amqp-alarm-test", port: 5762)
        try await broker.start()
        do {
            try await alarmRaisedByTheBacklog(on: broker)
        } catch {
            _ = try? await broker.rabbitmqctl(["set_vm_memory_high_watermark", "0.4"])
            try? await broker.stop()
            throw error
        }
        try await broker.stop()
    }

    private func alarmRaisedByTheBacklog(on broker: LocalServer) async throws {
        let queue = "alarm.backlog"
        let total = 6000
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 32 * 1024)
        let blockedChanges = Mutex<[(reason: String?, at: ContinuousClock.Instant)]>([])
        var configuration = try AMQPConfiguration(url: broker.url, connectionName: "alarm-test")
        configuration.publishTimeout = .seconds(120)
        configuration.maxUnconfirmedPublishes = 200
        let connection = AMQPConnection(
            configuration: configuration, topology: AMQPTopology(queues: [AMQPTopology.Queue(name: queue, arguments: ["x-queue-type": "classic"])]),
            logger: TestLogger.make("alarm-test"), publishing: .separate,
            onBlocked: { reason in blockedChanges.withLock { $0.append((reason, .now)) } })
        try await connection.waitUntilConnected(timeout: .seconds(15))
        do {
            // The broker measures the memory its Erlang VM uses (not the process's RSS, which the
            // allocator keeps), so what the consumer frees shows; the watermark sits 24 MiB above what
            // it uses now, and the backlog (6,000 × 32 KiB = 188 MiB if nobody consumed) must cross it.
            try await broker.rabbitmqctl(["-q", "eval", "application:set_env(rabbit, vm_memory_calculation_strategy, erlang)."])
            // Queues page messages out at half the watermark by default: not before the alarm here.
            try await broker.rabbitmqctl(["-q", "eval", "application:set_env(rabbit, vm_memory_high_watermark_paging_ratio, 1.5)."])
            let used = try await broker.rabbitmqctl(["-q", "eval", "erlang:memory(total)."])
            let bytes = try #require(Int(used.trimmingCharacters(in: .whitespacesAndNewlines)))
            try await broker.rabbitmqctl(["-q", "set_vm_memory_high_watermark", "absolute", String(bytes + 24 * 1024 * 1024)])

            let consumed = Mutex<Set<Int>>([])
            let consumer = connection.consume(queue: queue, prefetch: 50)
            let consuming = Task {
                // The backlog builds up until the broker blocks publishing (at most 60 s): then the
                // consumer starts acking, and only that can clear the alarm.
                let waitUntil = ContinuousClock.now + .seconds(60)
                for try await delivery in consumer {
                    if let number = delivery.properties.messageID.flatMap(Int.init) { consumed.withLock { _ = $0.insert(number) } }
                    while blockedChanges.withLock({ $0.isEmpty }), ContinuousClock.now < waitUntil { try? await Task.sleep(for: .milliseconds(20)) }
                    delivery.ack()
                    if consumed.withLock({ $0.count }) == total { break }
                }
            }
            // A producer publishing in batches of 100 and retrying what failed, as the services do.
            var failed = 0
            var pending = Array(0..<total)
            var rounds = 0
            while !pending.isEmpty, rounds < 100 {
                rounds += 1
                let batch = Array(pending.prefix(100))
                let results = await connection.publish(
                    batch.map {
                        AMQPOutboundMessage(
                            exchange: "", routingKey: queue, body: body, properties: AMQPProperties(persistent: false, messageID: String($0)))
                    })
                var retry: [Int] = []
                for (number, result) in zip(batch, results) where (try? result.get()) == nil {
                    retry.append(number)
                    failed += 1
                }
                pending = retry + pending.dropFirst(batch.count)
                // Paced, so publishing goes on after the broker's memory check (every 2.5 s) fires.
                try await Task.sleep(for: .milliseconds(50))
            }
            try await within(.seconds(120), "consuming every message") { try await consuming.value }
            let changes = blockedChanges.withLock { $0 }
            let blockedAt = changes.first { $0.reason != nil }?.at
            let clearedAt = changes.last.flatMap { $0.reason == nil ? $0.at : nil }
            #expect(blockedAt != nil, "the broker blocked publishing: \(changes.map(\.reason))")
            #expect(clearedAt != nil, "and unblocked it again by itself: \(changes.map(\.reason))")
            if let blockedAt, let clearedAt {
                print(
                    "memory alarm: publishing blocked \(changes.filter { $0.reason != nil }.count) time(s), first for \(clearedAt - blockedAt) until the last clear; \(failed) publishes retried"
                )
                // Measured: about 1 s with a separate publishing connection; 32 s with one shared
                // connection, whose acks the blocked broker stopped reading.
                #expect(clearedAt - blockedAt < .seconds(10), "the consumer's acks cleared the alarm quickly")
            }
            #expect(connection.blockedReason == nil)
            #expect(pending.isEmpty, "every publish confirmed in the end")
            #expect(consumed.withLock { $0 } == Set(0..<total), "every message consumed")
            #expect(connection.isConnected)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }
}
