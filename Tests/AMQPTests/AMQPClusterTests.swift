import AMQP
import Foundation
import Synchronization
import TestSupport
import Testing

/// The client against a real 3-node RabbitMQ cluster (`scripts/rabbitmq-cluster.sh`, nodes on
/// 127.0.0.1:5860, 5880 and 5900), whose node the connection uses is killed with SIGKILL.
@Suite(.serialized, .timeLimit(.minutes(5))) struct AMQPClusterTests {
    static let cluster = LocalCluster(.rabbitmq, name: "amqp-cluster-test", port: 5860)

    @Test func losingItsNodeMovesTheConnectionToAnotherAndNoConfirmedMessageIsLost() async throws {
        let cluster = Self.cluster
        try await cluster.start()
        try await withCleanUp {
            let configuration = try AMQPConfiguration(url: try await cluster.url(), connectionName: "cluster-test")
            #expect(configuration.brokers.count == 3)
            let queue = TestServers.uniqueName("amqp.cluster")
            // Replicated on every node, so the queue outlives any one of them.
            let topology = quorumQueue(queue).quorumInitialGroupSize(3)
            let connection = AMQPConnection(configuration: configuration, topology: topology, logger: TestLogger.make("amqp-cluster"))
            connection.start()
            try await withCleanUp {
                try await connection.waitUntilConnected(timeout: .seconds(30))
                let first = try #require(connection.connectedBroker)
                let members = try await cluster.script("members", ["--queue", queue])
                #expect(members.split(whereSeparator: \.isWhitespace).count == 3, "members: \(members)")

                // A consumer that runs across the failover and remembers every body it got.
                let received = Mutex<[String: Int]>([:])
                let consumer = connection.consume(queue: queue, prefetch: 100)
                let consuming = Task {
                    for try await delivery in consumer {
                        received.withLock { $0[String(decoding: delivery.body, as: UTF8.self), default: 0] += 1 }
                        delivery.ack()
                    }
                }
                defer { consuming.cancel() }

                // Publishes with confirms; one whose confirm was lost is published again (it may
                // then arrive twice: at least once, as the contract says).
                func publishAll(_ bodies: [String]) async throws -> Int {
                    var pending = bodies
                    var republished = 0
                    var lastError: AMQPError?
                    for _ in 0..<20 where !pending.isEmpty {
                        let results = await connection.publish(pending.map { message($0, to: queue) })
                        let failed = zip(pending, results).compactMap { body, result in
                            if case .failure = result { return body } else { return nil }
                        }
                        if let error = results.lazy.compactMap({ result -> AMQPError? in
                            if case .failure(let error) = result { return error } else { return nil }
                        }).first {
                            lastError = error
                        }
                        republished += failed.count
                        pending = failed
                        if !pending.isEmpty { try await Task.sleep(for: .milliseconds(200)) }
                    }
                    #expect(pending.isEmpty, "\(pending.count) publishes never confirmed; the last error: \(String(describing: lastError))")
                    return republished
                }
                let before = (0..<300).map { "before-\($0)" }
                _ = try await publishAll(before)

                let index = try #require(configuration.brokers.firstIndex(of: first)) + 1
                let killedAt = ContinuousClock.now
                try await cluster.killNode(index)
                let after = (0..<300).map { "after-\($0)" }
                let republished = try await publishAll(after)
                let reconnected = ContinuousClock.now - killedAt

                try await eventually("every message consumed", timeout: .seconds(60)) {
                    received.withLock { counts in (before + after).allSatisfy { counts[$0] != nil } }
                }
                let now = try #require(connection.connectedBroker)
                #expect(now != first, "the connection moved from \(first) to another node")
                let duplicates = received.withLock { $0.values.reduce(0) { $0 + $1 - 1 } }
                // Redeliveries of what was unacked at the kill, and republished lost confirms.
                #expect(duplicates <= 100 + republished, "duplicates \(duplicates), republished \(republished)")
                print(
                    "cluster failover: killed \(first), reconnected to \(now), publishing resumed within \(reconnected), \(duplicates) duplicates, \(republished) republished"
                )
                try await cluster.startNode(index)
            } cleanUp: {
                _ = try? await connection.deleteQueue(queue)
                await connection.close()
            }
        } cleanUp: {
            try await cluster.stop()
        }
    }
}
