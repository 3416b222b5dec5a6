import AMQP
import TestSupport

/// A durable quorum queue for one test, declared now; delete it when done.
func quorumQueue(_ name: String, arguments: AMQPTable = [:]) -> AMQPTopology {
    AMQPTopology(queues: [AMQPTopology.Queue(name: name, arguments: arguments.merging(["x-queue-type": "quorum"]) { a, _ in a })])
}

func message(_ text: String, to queue: String, headers: AMQPTable = [:]) -> AMQPOutboundMessage {
    AMQPOutboundMessage(exchange: "", routingKey: queue, body: Array(text.utf8), properties: AMQPProperties(headers: headers))
}

extension AMQPDelivery {
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// Runs `body` and fails if it has not finished within `limit`.
func within<T: Sendable>(_ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        guard let first = try await group.next(), let value = first else {
            group.cancelAll()
            throw TimeLimitExceeded(what: what, limit: limit)
        }
        group.cancelAll()
        return value
    }
}

struct TimeLimitExceeded: Error, CustomStringConvertible {
    let what: String
    let limit: Duration
    var description: String { "\(what) did not finish within \(limit)" }
}
