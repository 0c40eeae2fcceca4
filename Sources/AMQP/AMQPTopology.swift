/// Exchanges, queues and bindings to declare. Declaration is idempotent on the broker, so the same
/// topology is declared on every connect: a broker that lost its definitions (a fresh node, a
/// deleted queue) gets them back when the worker reconnects.
public struct AMQPTopology: Sendable, Hashable {
    public var exchanges: [Exchange]
    public var queues: [Queue]
    public var bindings: [Binding]

    public init(exchanges: [Exchange] = [], queues: [Queue] = [], bindings: [Binding] = []) {
        self.exchanges = exchanges
        self.queues = queues
        self.bindings = bindings
    }

    public var isEmpty: Bool { exchanges.isEmpty && queues.isEmpty && bindings.isEmpty }

    public struct Exchange: Sendable, Hashable {
        public var name: String
        /// direct, fanout, topic or headers.
        public var type: String
        public var durable: Bool
        public var autoDelete: Bool
        public var isInternal: Bool
        public var arguments: AMQPTable

        public init(_ name: String, type: String = "topic", durable: Bool = true, autoDelete: Bool = false, isInternal: Bool = false, arguments: AMQPTable = [:]) {
            self.name = name
            self.type = type
            self.durable = durable
            self.autoDelete = autoDelete
            self.isInternal = isInternal
            self.arguments = arguments
        }
    }

    public struct Queue: Sendable, Hashable {
        public var name: String
        public var durable: Bool
        public var exclusive: Bool
        public var autoDelete: Bool
        public var arguments: AMQPTable

        public init(_ name: String, durable: Bool = true, exclusive: Bool = false, autoDelete: Bool = false, arguments: AMQPTable = [:]) {
            self.name = name
            self.durable = durable
            self.exclusive = exclusive
            self.autoDelete = autoDelete
            self.arguments = arguments
        }

        /// Whether the broker makes it a quorum queue, whose declaration waits for a leader's
        /// election.
        public var isQuorum: Bool { arguments["x-queue-type"] == "quorum" }

        /// A durable queue with the common RabbitMQ arguments spelled out, so callers do not
        /// have to remember the `x-` names or their wire types.
        public static func durable(
            _ name: String,
            quorum: Bool = false,
            deliveryLimit: Int? = nil,
            deadLetterExchange: String? = nil,
            deadLetterRoutingKey: String? = nil,
            messageTTL: Duration? = nil,
            extraArguments: AMQPTable = [:]
        ) -> Queue {
            var args = extraArguments
            if quorum { args["x-queue-type"] = "quorum" }
            if let deliveryLimit { args["x-delivery-limit"] = .int64(Int64(deliveryLimit)) }
            if let deadLetterExchange { args["x-dead-letter-exchange"] = .string(deadLetterExchange) }
            if let deadLetterRoutingKey { args["x-dead-letter-routing-key"] = .string(deadLetterRoutingKey) }
            if let messageTTL { args["x-message-ttl"] = .int64(Int64((messageTTL / .milliseconds(1)).rounded())) }
            return Queue(name, durable: true, arguments: args)
        }
    }

    public struct Binding: Sendable, Hashable {
        public var queue: String
        public var exchange: String
        public var routingKey: String
        public var arguments: AMQPTable

        public init(queue: String, exchange: String, routingKey: String, arguments: AMQPTable = [:]) {
            self.queue = queue
            self.exchange = exchange
            self.routingKey = routingKey
            self.arguments = arguments
        }
    }
}
