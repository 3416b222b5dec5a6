import AMQP
import ArgumentParser
import Foundation
import Logging
import PushCore
import PushServiceKit

/// Fills `push.send` for the push-send benchmark (Benchmarks/send/run.sh, `make bench-send`):
/// `--count` tokens in send batches of `--batch-size`, published with confirms, then prints how long
/// it took. The script then starts push-send and apns-sandbox and measures the drain.
@main
struct SendBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send-bench",
        abstract: "Publishes send batches to push.send (under --prefix) for the push-send benchmark."
    )

    @Option(help: "RabbitMQ URL.")
    var amqpURL = "amqp://guest:guest@127.0.0.1:5672/%2f"

    @Option(help: "Queue name prefix (push-send's PUSH_SEND_QUEUE_PREFIX).")
    var prefix = "bench"

    @Option(help: "The app's bundle id (as in the benchmark's apps file).")
    var app = "com.example.bench"

    @Option(help: "Tokens in all.")
    var count = 1_000_000

    @Option(help: "Tokens per send batch.")
    var batchSize = 500

    func validate() throws {
        guard count >= 1, (1...10_000).contains(batchSize) else { throw ValidationError("--count ≥ 1 and --batch-size 1–10000") }
    }

    func run() async throws {
        var logger = Logger(label: "send-bench")
        logger.logLevel = .warning
        let names = PushQueues(prefix: prefix)
        let amqp = AMQPConnection(
            configuration: try AMQPConfiguration(url: amqpURL, connectionName: "send-bench"),
            topology: .push(names),
            logger: logger
        )
        try await amqp.waitUntilConnected(timeout: .seconds(30))
        let started = ContinuousClock.now
        let requestID = "bench-\(UUID().uuidString.prefix(8))"
        let payload = #"{"aps":{"alert":{"title":"Benchmark","body":"One of a million"},"badge":1,"sound":"default"}}"#
        let encoder = JSONEncoder()
        var published = 0
        var sequence = 0
        var pending: [AMQPOutboundMessage] = []
        func flush() async throws {
            for result in await amqp.publish(pending) { try result.get() }
            pending.removeAll(keepingCapacity: true)
        }
        while published < count {
            let size = min(batchSize, count - published)
            let tokens = (published..<published + size).map(Self.token)
            let batch = SendBatch(
                requestID: requestID, batchID: "\(requestID)/\(sequence)", app: app, environment: .production, pushType: "alert",
                priority: 10, payload: payload, tokens: tokens, createdAt: Int64(Date().timeIntervalSince1970 * 1000)
            )
            pending.append(AMQPOutboundMessage(exchange: names.exchange, routingKey: names.send.routingKey, body: Array(try encoder.encode(batch))))
            if pending.count == 100 { try await flush() }
            published += size
            sequence += 1
        }
        try await flush()
        let elapsed = ContinuousClock.now - started
        print(
            "filled \(names.send.name) with \(count) tokens in \(sequence) batches of \(batchSize) in \(String(format: "%.1f", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)) s"
        )
        await amqp.close()
    }

    /// A distinct 64-hex-digit token per index.
    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return "be" + String(repeating: "0", count: 62 - hex.count) + hex
    }
}
