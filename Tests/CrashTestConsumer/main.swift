// A consumer that crashes on purpose, for the crash-loop test (PushServiceKitTests.CrashLoopTests):
// it consumes `<prefix>.requests` with the consumer kit and the crash guard of every push service,
// works `PUSH_CRASH_WORK_MS` on each message, adds each body to the Redis set `<key prefix>:processed`
// and acks it, and dies of an arithmetic overflow (a Swift trap, as a hostile number once did in
// push-send) on any body that contains "poison". Runs until SIGTERM.
//
// Environment: PUSH_AMQP_URL, PUSH_REDIS_URL, PUSH_CRASH_QUEUE_PREFIX, PUSH_CRASH_KEY_PREFIX,
// PUSH_CRASH_PREFETCH (default 8), PUSH_CRASH_WORK_MS (default 20).
import AMQP
import Foundation
import Logging
import PushCore
import PushServiceKit
import Redis
import ServiceLifecycle
import UnixSignals

struct CrashTestConsumer: Service {
    let amqp: AMQPConnection
    let redis: RedisClient
    let queues: PushQueues
    let keyPrefix: String
    let prefetch: Int
    let work: Duration
    let logger: Logger

    func run() async throws {
        let settler = DeliverySettler(queue: queues.requests, queues: queues, subject: "test message", gaveUp: "not done")
        let crashGuard = CrashGuard(
            service: "crash-test-consumer", queue: queues.requests, queues: queues, redis: redis, keyPrefix: keyPrefix, amqp: amqp, logger: logger)
        let loop = BoundedConsumer(name: "crash test consumer", bounds: .init(workers: prefetch), logger: logger, crashGuard: crashGuard)
        let consumer = amqp.consume(queue: queues.requests.name, prefetch: UInt16(prefetch))
        try await loop.run(consumer) { delivery in
            try? await Task.sleep(for: work)
            let body = String(decoding: delivery.body, as: UTF8.self)
            if body.contains("poison") {
                // An overflow the compiler cannot see coming: the trap a hostile number used to cause.
                let huge = Int64.max - Int64(body.count % 2)
                let scaled = huge * Int64(1000 + body.count)
                print("unreachable \(scaled)")
            }
            do {
                try await redis.execute("SADD", "\(keyPrefix):processed", body)
                await settler.settle(delivery, .ack, amqp: amqp, logger: logger)
            } catch {
                await settler.settle(delivery, .requeue(after: .milliseconds(100)), amqp: amqp, logger: logger)
            }
        }
    }
}

let environment = ProcessInfo.processInfo.environment
func setting(_ name: String) -> String {
    guard let value = environment[name], !value.isEmpty else {
        FileHandle.standardError.write(Data("crash-test-consumer: \(name) is not set\n".utf8))
        exit(2)
    }
    return value
}

var logger = Logger(label: "crash-test-consumer")
logger.logLevel = .info
let queues = PushQueues(prefix: setting("PUSH_CRASH_QUEUE_PREFIX"))
let keyPrefix = setting("PUSH_CRASH_KEY_PREFIX")
let amqp = AMQPConnection(
    configuration: try AMQPConfiguration(url: setting("PUSH_AMQP_URL"), connectionName: "crash-test-consumer"), topology: .push(queues),
    logger: logger)
let redisConfiguration = try RedisConfiguration(url: setting("PUSH_REDIS_URL"))
let redis = RedisClient(configuration: redisConfiguration, logger: logger)
try CrashRecorder.arm(configuration: redisConfiguration, keyPrefix: keyPrefix)
let consumer = CrashTestConsumer(
    amqp: amqp, redis: redis, queues: queues, keyPrefix: keyPrefix, prefetch: Int(environment["PUSH_CRASH_PREFETCH"] ?? "") ?? 8,
    work: .milliseconds(Int(environment["PUSH_CRASH_WORK_MS"] ?? "") ?? 20), logger: logger)
let group = ServiceGroup(
    configuration: .init(
        services: [.init(service: amqp), .init(service: redis), .init(service: consumer)], gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger))
try await group.run()
