import AMQP
import ArgumentParser
import Foundation
import PushCore
import PushServiceKit

extension PushctlCommand {
    /// `pushctl topology`: the RabbitMQ topology every service declares at start, as JSON, without a
    /// broker. For infrastructure code that declares it ahead of the services, and for the contract
    /// check, which holds docs/asyncapi.yaml to it.
    struct Topology: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the RabbitMQ topology the services declare (exchanges, queues and their arguments, bindings) as JSON."
        )

        @Option(help: "The name prefix (PUSH_*_QUEUE_PREFIX; default push).")
        var prefix = "push"

        func validate() throws {
            guard PushQueues.isValidPrefix(prefix) else {
                throw ValidationError("--prefix '\(prefix)' must be letters, digits, '.', '-' or '_'")
            }
        }

        func run() throws {
            print(Self.json(AMQPTopology.push(PushQueues(prefix: prefix))))
        }

        /// The topology as pretty JSON with sorted keys: `{"exchanges": [{"name", "type", "durable"}],
        /// "queues": [{"name", "durable", "arguments", "creation_arguments"}], "bindings": [{"queue",
        /// "exchange", "routing_key"}]}`, in declaration order.
        static func json(_ topology: AMQPTopology) -> String {
            let object: [String: Any] = [
                "exchanges": topology.exchanges.map { ["name": $0.name, "type": $0.type, "durable": $0.durable, "arguments": table($0.arguments)] },
                "queues": topology.queues.map {
                    ["name": $0.name, "durable": $0.durable, "arguments": table($0.arguments), "creation_arguments": table($0.creationArguments)]
                },
                "bindings": topology.bindings.map { ["queue": $0.queue, "exchange": $0.exchange, "routing_key": $0.routingKey] },
            ]
            // Only strings, numbers, booleans, arrays and objects: serialisation cannot fail.
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])) ?? Data("{}".utf8)
            return String(decoding: data, as: UTF8.self)
        }

        /// An argument table as JSON values: strings and integers as themselves, anything else as its description.
        static func table(_ table: AMQPTable) -> [String: Any] {
            var object: [String: Any] = [:]
            for (key, value) in table {
                if let text = value.stringValue {
                    object[key] = text
                } else if let number = value.intValue {
                    object[key] = number
                } else if case .bool(let flag) = value {
                    object[key] = flag
                } else {
                    object[key] = "\(value)"
                }
            }
            return object
        }
    }
}
