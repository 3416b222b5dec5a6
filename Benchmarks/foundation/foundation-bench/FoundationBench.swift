import AMQP
import ArgumentParser
import Foundation
import Logging
import Redis

/// Throughput of the two foundation clients against real servers on loopback.
///
/// AMQP: 300-byte persistent messages through one quorum queue — publish with confirms alone, consume
/// with per-message acks alone, consume with `multiple` acks, and publish + consume at once (the
/// end-to-end figure). Redis: pipelined SET/GET from one connection.
@main
struct FoundationBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "foundation-bench",
        abstract: "Measure AMQP publish/consume and Redis pipeline throughput on loopback."
    )

    @Option(help: "RabbitMQ URL (default: PUSH_AMQP_URL, else the local default).")
    var amqpURL: String?

    @Option(help: "Redis URL (default: PUSH_REDIS_URL, else the local default).")
    var redisURL: String?

    @Option(help: "Messages per AMQP phase.")
    var messages = 100_000

    @Option(help: "Message body size in bytes.")
    var size = 300

    @Option(help: "Publishes handed to the client at once (it keeps up to 2000 unconfirmed).")
    var publishBatch = 1000

    @Option(help: "Consumer prefetch.")
    var prefetch: UInt16 = 1000

    @Option(help: "Redis operations (half SET, half GET).")
    var redisOperations = 2_000_000

    @Option(help: "Commands per Redis pipeline.")
    var pipelineDepth = 10_000

    @Flag(help: "Skip the AMQP part.")
    var skipAMQP = false

    @Flag(help: "Skip the Redis part.")
    var skipRedis = false

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let logger = Logger(label: "foundation-bench", factory: { _ in SwiftLogNoOpLogHandler() })
        print("foundation-bench: \(ProcessInfo.processInfo.activeProcessorCount) cores")
        if !skipAMQP {
            let url = amqpURL ?? environment["PUSH_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2f"
            try await AMQPBench(url: url, messages: messages, size: size, batch: publishBatch, prefetch: prefetch, logger: logger).run()
        }
        if !skipRedis {
            let url = redisURL ?? environment["PUSH_REDIS_URL"] ?? "redis://127.0.0.1:6379/0"
            try await RedisBench(url: url, operations: redisOperations, depth: pipelineDepth, logger: logger).run()
        }
    }
}

func rate(_ count: Int, _ elapsed: Duration) -> String {
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return String(format: "%9.0f /s  (%d in %.2f s)", Double(count) / seconds, count, seconds)
}

struct AMQPBench {
    let url: String
    let messages: Int
    let size: Int
    let batch: Int
    let prefetch: UInt16
    let logger: Logger

    func run() async throws {
        let queue = "bench.foundation.\(ProcessInfo.processInfo.processIdentifier)"
        let topology = AMQPTopology(queues: [.init(name: queue, arguments: ["x-queue-type": "quorum"])])
        let publisher = AMQPConnection(
            configuration: try AMQPConfiguration(url: url, connectionName: "bench-publisher"), topology: topology, logger: logger)
        let consumer = AMQPConnection(
            configuration: try AMQPConfiguration(url: url, connectionName: "bench-consumer"), topology: topology, logger: logger)
        try await publisher.waitUntilConnected(timeout: .seconds(10))
        try await consumer.waitUntilConnected(timeout: .seconds(10))
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: size)
        let message = AMQPOutboundMessage(exchange: "", routingKey: queue, body: body)
        print(
            "AMQP \(url.replacingOccurrences(of: #"//[^@]*@"#, with: "//", options: .regularExpression)): \(messages) persistent \(size)-byte messages per phase, one quorum queue, publish batches of \(batch), prefetch \(prefetch)"
        )

        var started = ContinuousClock.now
        try await publish(messages, message, with: publisher)
        print("  publish with confirms        \(rate(messages, ContinuousClock.now - started))")

        started = ContinuousClock.now
        try await consume(messages, from: queue, with: consumer, ackEvery: 1)
        print("  consume, ack each message    \(rate(messages, ContinuousClock.now - started))")

        try await publish(messages, message, with: publisher)
        started = ContinuousClock.now
        try await consume(messages, from: queue, with: consumer, ackEvery: 100)
        print("  consume, multiple ack /100   \(rate(messages, ContinuousClock.now - started))")

        started = ContinuousClock.now
        async let consumed: Void = consume(messages, from: queue, with: consumer, ackEvery: 1)
        try await publish(messages, message, with: publisher)
        try await consumed
        print("  publish + consume at once    \(rate(messages, ContinuousClock.now - started))  (end to end, ack each)")

        started = ContinuousClock.now
        async let consumedMultiple: Void = consume(messages, from: queue, with: consumer, ackEvery: 100)
        try await publish(messages, message, with: publisher)
        try await consumedMultiple
        print("  publish + consume at once    \(rate(messages, ContinuousClock.now - started))  (end to end, multiple ack /100)")

        try await publisher.deleteQueue(queue)
        await publisher.close()
        await consumer.close()
    }

    /// Keeps two batches in flight so the broker always has work while the client waits for confirms.
    private func publish(_ count: Int, _ message: AMQPOutboundMessage, with connection: AMQPConnection) async throws {
        let batches = stride(from: 0, to: count, by: batch).map { min(batch, count - $0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            func add() {
                let size = batches[next]
                next += 1
                group.addTask {
                    let results = await connection.publish(Array(repeating: message, count: size))
                    for result in results { try result.get() }
                }
            }
            for _ in 0..<min(2, batches.count) { add() }
            while try await group.next() != nil {
                if next < batches.count { add() }
            }
        }
    }

    private func consume(_ count: Int, from queue: String, with connection: AMQPConnection, ackEvery: Int) async throws {
        let consumer = connection.consume(queue: queue, prefetch: prefetch)
        var received = 0
        for try await delivery in consumer {
            received += 1
            if received % ackEvery == 0 || received == count { delivery.ack(multiple: ackEvery > 1) }
            if received == count { break }
        }
        consumer.cancel()
    }
}

struct RedisBench {
    let url: String
    let operations: Int
    let depth: Int
    let logger: Logger

    func run() async throws {
        var configuration = try RedisConfiguration(url: url)
        configuration.poolSize = 1
        configuration.commandTimeout = .seconds(30)
        let client = try await RedisClient.connect(configuration: configuration, logger: logger)
        let prefix = "bench:\(ProcessInfo.processInfo.processIdentifier):"
        let value = [UInt8](repeating: UInt8(ascii: "v"), count: 64)
        let keyCount = 10_000
        print(
            "Redis \(configuration.endpoint): \(operations) operations (SET then GET of 64-byte values over \(keyCount) keys), pipelines of \(depth), one connection"
        )
        let started = ContinuousClock.now
        var done = 0
        while done < operations {
            let count = min(depth, operations - done)
            var commands: [RedisCommand] = []
            commands.reserveCapacity(count)
            for index in 0..<count {
                let key = prefix + String((done + index) % keyCount)
                if index % 2 == 0 {
                    var command = RedisCommand("SET", key)
                    command.append(value)
                    commands.append(command)
                } else {
                    commands.append(RedisCommand("GET", key))
                }
            }
            let replies = try await client.pipeline(commands)
            guard replies.count == count, !replies.contains(where: { $0.errorMessage != nil }) else {
                throw ValidationError("unexpected Redis replies")
            }
            done += count
        }
        print("  pipelined SET/GET            \(rate(operations, ContinuousClock.now - started))")
        var cleanup = RedisCommand("DEL")
        for index in 0..<keyCount { cleanup.append(prefix + String(index)) }
        _ = try await client.send(cleanup)
        await client.close()
    }
}
