import AMQP
import ArgumentParser
import Foundation
import PushCore
import PushServiceKit

extension PushctlCommand {
    /// `pushctl dead list|replay`: what ended in `push.dead` and why, and sending it back once the
    /// cause is fixed.
    struct Dead: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Inspect and replay dead letters (push.dead).",
            subcommands: [List.self, Replay.self]
        )

        /// The queue a dead letter came from: RabbitMQ's `x-death` (the first entry's queue), if any.
        static func sourceQueue(_ delivery: AMQPDelivery) -> String? { DeadLetter.sourceQueue(delivery.properties.headers) }

        /// Up to `limit` deliveries from `push.dead`, unsettled.
        static func take(_ amqp: AMQPConnection, queues: PushQueues, limit: Int) async throws -> [AMQPDelivery] {
            try await DeadLetterQueue(amqp: amqp, queues: queues).take(limit: limit, idleWait: .seconds(2))
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Print up to N dead letters (reason, source queue, body) and leave them in place."
            )

            @OptionGroup var connection: ConnectionOptions

            @Option(help: "At most this many.")
            var limit: Int = 20

            func run() async throws {
                guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be 1–10000") }
                let amqp = try await connection.amqp()
                let letters = DeadLetterQueue(amqp: amqp, queues: connection.queues)
                let deliveries = try await Dead.take(amqp, queues: connection.queues, limit: limit)
                for delivery in deliveries {
                    let reason = DeadLetterReason(headers: delivery.properties.headers)
                    let source = Dead.sourceQueue(delivery) ?? "-"
                    // A body is anyone's bytes: escaped, so it cannot move the cursor or recolour the
                    // operator's terminal.
                    let body = TerminalText.escaped(String(decoding: delivery.body.prefix(2000), as: UTF8.self))
                    print("reason: \(TerminalText.escaped(reason.description))\nfrom:   \(TerminalText.escaped(source))\nbody:   \(body)\n")
                }
                for delivery in deliveries { await letters.giveBack(delivery) }
                await amqp.close()
                print("\(deliveries.count) dead letter(s) shown")
            }
        }

        struct Replay: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "Send dead letters back to a work queue (the one they died in, or --to), each removed only after the broker confirmed the copy.",
                discussion: "Letters a service dead-lettered itself name no source queue; replay those with --to, e.g. --to push.requests."
            )

            @OptionGroup var connection: ConnectionOptions

            @Option(help: "The queue to send them to (default: the queue each one died in).")
            var to: String?

            @Option(help: "Replay only letters whose reason (as `pushctl dead list` prints it) contains this text.")
            var matching: String?

            @Option(help: "At most this many.")
            var limit: Int = 1000

            func run() async throws {
                guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be 1–100000") }
                let workQueues = connection.queues.workQueues.map(\.name)
                if let to, !workQueues.contains(to) {
                    throw ValidationError("--to must be a work queue: \(workQueues.joined(separator: ", "))")
                }
                let amqp = try await connection.amqp()
                let deliveries = try await Dead.take(amqp, queues: connection.queues, limit: limit)
                var replayed = 0
                var skipped = 0
                for delivery in deliveries {
                    let reason = DeadLetterReason(headers: delivery.properties.headers).description
                    guard matching.map({ reason.contains($0) }) ?? true, let target = to ?? Dead.sourceQueue(delivery) else {
                        await DeadLetterQueue(amqp: amqp, queues: connection.queues).giveBack(delivery)
                        skipped += 1
                        continue
                    }
                    // Due now: the queue's message age should not count the time it lay in push.dead.
                    let properties = DeadLetter.replayProperties(delivery.properties, now: UInt64(Date().timeIntervalSince1970))
                    do {
                        try await amqp.publish(AMQPOutboundMessage(exchange: "", routingKey: target, body: delivery.body, properties: properties))
                        delivery.ack()
                        replayed += 1
                    } catch {
                        delivery.nack(requeue: true)
                        await amqp.close()
                        throw error
                    }
                }
                await amqp.close()
                print("replayed \(replayed) dead letter(s); left \(skipped) in push.dead")
            }
        }
    }
}
