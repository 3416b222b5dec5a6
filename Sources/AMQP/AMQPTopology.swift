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

        public init(name: String, durable: Bool = true, exclusive: Bool = false, autoDelete: Bool = false, arguments: AMQPTable = [:]) {
            self.name = name
            self.durable = durable
            self.exclusive = exclusive
            self.autoDelete = autoDelete
            self.arguments = arguments
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
}
