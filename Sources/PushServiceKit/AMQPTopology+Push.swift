public import AMQP
public import PushCore

extension AMQPTopology {
    /// The whole topology of CONTRACT.md, declared by every service at start and after reconnects.
    ///
    /// - `push` (direct) routes `request`, `registration`, `send`, `feedback` and `dead` to the
    ///   durable quorum queues of the same role.
    /// - Work queues dead-letter rejected messages to `push.dead` (routing key `dead`) and give up on a
    ///   message after ``PushQueues/deliveryLimit`` redeliveries.
    /// - Each retry tier is a quorum queue whose messages expire after the tier's delay (queue TTL) and
    ///   are dead-lettered, at least once, back to their work queue through the default exchange.
    ///   Publish to a tier through the default exchange with the tier's queue name as routing key.
    /// - `push.events` (topic) has no queues of ours; other services bind their own. Publish events
    ///   with `mandatory: false`, since nobody may be listening.
    public static let push = push(PushQueues.standard)

    /// The same shape under another name prefix (tests use their own).
    public static func push(_ names: PushQueues) -> AMQPTopology {
        var topology = AMQPTopology(
            exchanges: [
                Exchange(name: names.exchange, type: "direct"),
                Exchange(name: names.eventsExchange, type: "topic"),
            ]
        )
        for queue in names.workQueues {
            topology.queues.append(
                Queue(
                    name: queue.name,
                    arguments: [
                        "x-queue-type": "quorum",
                        "x-dead-letter-exchange": .string(names.exchange),
                        "x-dead-letter-routing-key": .string(names.deadRoutingKey),
                        "x-delivery-limit": .int64(Int64(PushQueues.deliveryLimit)),
                    ]
                )
            )
            topology.bindings.append(Binding(queue: queue.name, exchange: names.exchange, routingKey: queue.routingKey))
            topology.queues.append(contentsOf: retryQueues(for: queue))
        }
        // A limit no look at the letters reaches: RabbitMQ 4 gives a quorum queue without one a limit
        // of 20 and drops a letter returned more often (push.dead has no dead-letter exchange), and
        // every look at the letters returns them. -1 would mean "none" on 4.x but "drop at the first
        // return" on 3.x. A creation argument, so a push.dead made before keeps what it has: the
        // `push-dead-letters` policy (deploy/rabbitmq/policies.json) sets the same on it, and
        // DeadLetterQueue renews letters looked at often.
        topology.queues.append(
            Queue(
                name: names.dead, arguments: ["x-queue-type": "quorum"],
                creationArguments: ["x-delivery-limit": .int64(Int64(PushQueues.deadLetterDeliveryLimit))]))
        topology.bindings.append(Binding(queue: names.dead, exchange: names.exchange, routingKey: names.deadRoutingKey))
        return topology
    }

    /// The delayed-retry queues of one work queue.
    public static func retryQueues(for queue: WorkQueue) -> [Queue] {
        queue.retryQueues.map { retry in
            let (seconds, attoseconds) = retry.delay.components
            return Queue(
                name: retry.name,
                arguments: [
                    "x-queue-type": "quorum",
                    "x-message-ttl": .int64(seconds * 1000 + attoseconds / 1_000_000_000_000_000),
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": .string(queue.name),
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                ]
            )
        }
    }
}
