import AMQP
import ArgumentParser
import Foundation
import Logging
import PushCore
import PushServiceKit

/// The operator CLI.
@main
struct PushctlCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushctl",
        abstract: "Operator CLI for the push provider.",
        discussion: PushConfiguration.environmentHelp,
        version: PushVersion.current,
        subcommands: [
            Queues.self, Publish.self, Request.self, Token.self, Registry.self, Dead.self, Send.self, Bench.self, Feedback.self, Channel.self,
            Apps.self,
            Console.self, Topology.self,
        ]
    )
}

extension PushctlCommand {
    /// `pushctl queues`: depth and consumers of every push queue, the first thing to look at on call.
    struct Queues: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show messages ready and consumers for every queue of the push topology."
        )

        @Option(help: "RabbitMQ URL (default: PUSH_AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/%2f).")
        var amqpURL: String?

        @Flag(help: "Print JSON instead of a table.")
        var json = false

        func run() async throws {
            let url = amqpURL ?? ProcessInfo.processInfo.environment["PUSH_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2f"
            let connection = AMQPConnection(
                configuration: try AMQPConfiguration(url: url, connectionName: "pushctl"),
                logger: Logger(label: "pushctl", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            let rows: [(name: String, messages: Int?, consumers: Int?)]
            do {
                try await connection.waitUntilConnected(timeout: .seconds(10))
                rows = try await Self.statuses(connection)
                await connection.close()
            } catch {
                await connection.close()
                throw error
            }
            if json {
                let objects = rows.map { row -> [String: Any] in
                    ["queue": row.name, "messages": row.messages as Any? ?? NSNull(), "consumers": row.consumers as Any? ?? NSNull()]
                }
                let data = try JSONSerialization.data(withJSONObject: ["queues": objects], options: [.sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            } else {
                let width = rows.map(\.name.count).max() ?? 10
                print("QUEUE".padding(toLength: width, withPad: " ", startingAt: 0) + "  MESSAGES  CONSUMERS")
                for row in rows {
                    let messages = row.messages.map(String.init) ?? "missing"
                    let consumers = row.consumers.map(String.init) ?? "-"
                    print(
                        row.name.padding(toLength: width, withPad: " ", startingAt: 0) + "  "
                            + messages.leftPadded(to: 8) + "  " + consumers.leftPadded(to: 9)
                    )
                }
            }
        }
    }
}

extension PushctlCommand.Queues {
    /// Every queue's status; a queue that does not exist (404) shows as missing.
    static func statuses(_ connection: AMQPConnection) async throws -> [(name: String, messages: Int?, consumers: Int?)] {
        var rows: [(name: String, messages: Int?, consumers: Int?)] = []
        for name in PushQueues.standard.allQueueNames {
            let result: Result<(messages: Int, consumers: Int), AMQPError>
            do {
                result = .success(try await connection.queueStatus(name))
            } catch {
                result = .failure(error)
            }
            switch result {
            case .success(let status): rows.append((name, status.messages, status.consumers))
            case .failure(let error) where error.replyCode == 404: rows.append((name, nil, nil))
            case .failure(let error): throw error
            }
        }
        return rows
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
