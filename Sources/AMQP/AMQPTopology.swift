/// Exchanges, queues and bindings a connection declares every time it connects.
///
/// Declaring is idempotent as long as the arguments match what exists; a mismatch is a broker
/// `PRECONDITION_FAILED` error that names the queue, surfaced as the connection's last error.
public struct AMQPTopology: Sendable, Equatable {
    public struct Exchange: Sendable, Equatable {
        public var name: String
        /// `direct`, `topic`, `fanout` or `headers`.
        public var type: String
        public var durable: Bool
        public var arguments: AMQPTable

        public init(name: String, type: String, durable: Bool = true, arguments: AMQPTable = [:]) {
            self.name = name
            self.type = type
            self.durable = durable
            self.arguments = arguments
        }
    }

    public struct Queue: Sendable, Equatable {
        public var name: String
        public var durable: Bool
        public var exclusive: Bool
        public var autoDelete: Bool
        /// e.g. `x-queue-type: quorum`, `x-message-ttl`, `x-dead-letter-exchange`.
        public var arguments: AMQPTable
        /// Arguments that only shape a queue being created, such as `x-quorum-initial-group-size`: a
        /// queue that already exists with other values (or none) keeps them, and declaring it is not
        /// an error, since they cannot change after creation anyway.
        public var creationArguments: AMQPTable

        public init(
            name: String, durable: Bool = true, exclusive: Bool = false, autoDelete: Bool = false, arguments: AMQPTable = [:],
            creationArguments: AMQPTable = [:]
        ) {
            self.name = name
            self.durable = durable
            self.exclusive = exclusive
            self.autoDelete = autoDelete
            self.arguments = arguments
            self.creationArguments = creationArguments
        }
    }

    public struct Binding: Sendable, Equatable {
        public var queue: String
        public var exchange: String
        public var routingKey: String

        public init(queue: String, exchange: String, routingKey: String) {
            self.queue = queue
            self.exchange = exchange
            self.routingKey = routingKey
        }
    }

    public var exchanges: [Exchange]
    public var queues: [Queue]
    public var bindings: [Binding]

    public init(exchanges: [Exchange] = [], queues: [Queue] = [], bindings: [Binding] = []) {
        self.exchanges = exchanges
        self.queues = queues
        self.bindings = bindings
    }

    public static let empty = AMQPTopology()

    /// The same topology with every quorum queue created with `size` replicas
    /// (`x-quorum-initial-group-size`, a creation argument); nil leaves RabbitMQ's default, which is
    /// every node of the cluster at the moment the queue is created.
    public func quorumInitialGroupSize(_ size: Int?) -> AMQPTopology {
        guard let size else { return self }
        var topology = self
        for index in topology.queues.indices where topology.queues[index].arguments["x-queue-type"] == .string("quorum") {
            topology.queues[index].creationArguments["x-quorum-initial-group-size"] = .int64(Int64(size))
        }
        return topology
    }
}
