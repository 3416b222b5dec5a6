import AMQP
import Foundation
import PushCore
import PushServiceKit
import Redis
import TestSupport
import Testing

/// The crash guard end to end: a consumer binary (crash-test-consumer) that dies of an overflow on one
/// message, restarted after every crash as a supervisor would, among innocent messages.
@Suite("Crash loop", .serialized)
struct CrashLoopTests {
    @Test("a message that crashes its consumer is dead-lettered after at most 2 crashes; every other message is done, none parked")
    func aPoisonMessageIsParkedWithinTwoCrashes() async throws {
        let queues = PushQueues(prefix: TestServers.uniqueName("crashloop"))
        let keyPrefix = TestServers.uniqueName("crashloop")
        let redis = try await TestServers.connectRedis(logger: TestLogger.make("crash-loop-redis"))
        let innocents = (0..<40).map { "innocent-\($0)" }
        try await withAMQPConnection(name: "crash-loop-test", topology: .push(queues)) { amqp in
            try await withCleanUp {
                // The poison sits among the first deliveries, so innocents are in flight with it.
                var bodies = innocents
                bodies.insert("poison-pill", at: 3)
                for body in bodies {
                    try await amqp.publish(
                        AMQPOutboundMessage(exchange: queues.exchange, routingKey: queues.requests.routingKey, body: Array(body.utf8)))
                }
                var crashes = 0
                var runs = 0
                var finished = false
                let environment = [
                    "PUSH_AMQP_URL": TestServers.amqpURL, "PUSH_REDIS_URL": TestServers.redisURL, "PUSH_CRASH_QUEUE_PREFIX": queues.prefix,
                    "PUSH_CRASH_KEY_PREFIX": keyPrefix, "PUSH_CRASH_PREFETCH": "8", "PUSH_CRASH_WORK_MS": "30",
                ]
                // A supervisor's restart loop, bounded: without the guard the poison would crash it
                // until the queue's delivery limit (20) parks it.
                while !finished && runs < 6 {
                    runs += 1
                    let consumer = try ChildProcess(
                        [TestServers.productsDirectory.appendingPathComponent("crash-test-consumer").path], environment: environment)
                    let deadline = ContinuousClock.now + .seconds(60)
                    while ContinuousClock.now < deadline {
                        if let status = consumer.status {
                            #expect(status >= 128, "crash-test-consumer exited \(status) without a crash:\n\(consumer.output.suffix(2000))")
                            crashes += 1
                            break
                        }
                        let processed = try await redis.execute("SCARD", "\(keyPrefix):processed").integer ?? 0
                        let dead = try await amqp.queueStatus(queues.dead).messages
                        if processed == innocents.count && dead >= 1 {
                            finished = true
                            break
                        }
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    if consumer.status == nil {
                        consumer.signal(SIGTERM)
                        let status = await consumer.waitForExit(timeout: .seconds(20))
                        #expect(status == 0, "crash-test-consumer did not stop cleanly:\n\(consumer.output.suffix(2000))")
                    }
                }
                #expect(finished, "not done after \(runs) runs and \(crashes) crashes")
                #expect((1...2).contains(crashes), "the poison crashed the consumer \(crashes) times")

                let processed = try await redis.execute("SMEMBERS", "\(keyPrefix):processed").array?.compactMap(\.string) ?? []
                #expect(Set(processed) == Set(innocents))
                let dead = try await amqp.receive(from: queues.dead, count: 1, timeout: .seconds(10))
                #expect(String(decoding: dead[0].body, as: UTF8.self) == "poison-pill")
                let reason = dead[0].properties.headers[PushQueues.errorHeader]?.stringValue ?? ""
                #expect(reason.contains("crashed crash-test-consumer"), "reason: \(reason)")
                #expect(try await amqp.queueStatus(queues.dead).messages == 0, "an innocent message was parked")
                #expect(try await amqp.queueStatus(queues.requests.name).messages == 0)
            } cleanUp: {
                for queue in queues.allQueueNames { _ = try? await amqp.deleteQueue(queue) }
                try await redis.deleteKeys(matching: "\(keyPrefix):*")
                await redis.close()
            }
        }
    }

    @Test("the work queues dead-letter at least once: the policy of deploy/rabbitmq/policies.json is in effect")
    func workQueuesDeadLetterAtLeastOnce() async throws {
        let queues = PushQueues(prefix: TestServers.uniqueName("dlpolicy"))
        try await withAMQPConnection(name: "dead-letter-policy-test", topology: .push(queues)) { amqp in
            try await withCleanUp {
                let broker = TestServers.sharedBroker
                let listing = try await broker.rabbitmqctl(["-q", "list_queues", "--no-table-headers", "name", "policy"])
                func policy(of queue: String) -> String? {
                    listing.split(whereSeparator: \.isNewline).first { $0.hasPrefix(queue + "\t") }.map { String($0.dropFirst(queue.count + 1)) }
                }
                for queue in queues.workQueues {
                    #expect(policy(of: queue.name) == "push-work-queues", "\(queue.name): \(policy(of: queue.name) ?? "not listed")")
                }
                #expect(
                    policy(of: queues.dead) == "push-dead-letters",
                    "the dead-letter queue takes its own: a delivery limit no look reaches (RabbitMQ 4 gives 20 by default)")
                let policies = try await broker.rabbitmqctl(["-q", "list_policies", "--no-table-headers"])
                let line = policies.split(whereSeparator: \.isNewline).first { $0.contains("\tpush-work-queues\t") }
                #expect(line?.contains(#""dead-letter-strategy":"at-least-once""#) == true, "\(line ?? "no push-work-queues policy")")
                #expect(line?.contains(#""overflow":"reject-publish""#) == true, "\(line ?? "no push-work-queues policy")")
            } cleanUp: {
                for queue in queues.allQueueNames { _ = try? await amqp.deleteQueue(queue) }
            }
        }
    }
}
