import Foundation

/// A message to publish: where it goes, its body and its properties.
public struct AMQPMessage: Sendable {
    public var exchange: String
    public var routingKey: String
    public var body: [UInt8]
    public var properties: AMQPProperties
    /// Ask the broker to return the message when no queue takes it; the publish then throws
    /// ``AMQPError/Kind-swift.enum/returned`` instead of succeeding silently.
    public var mandatory: Bool

    public init(
        exchange: String = "",
        routingKey: String,
        body: [UInt8],
        properties: AMQPProperties = AMQPProperties(),
        mandatory: Bool = false
    ) {
        self.exchange = exchange
        self.routingKey = routingKey
        self.body = body
        self.properties = properties
        self.mandatory = mandatory
    }

    /// A message for the default exchange, which routes straight to the queue of that name.
    public static func toQueue(
        _ queue: String, body: [UInt8], properties: AMQPProperties = AMQPProperties(), mandatory: Bool = true
    ) -> AMQPMessage {
        AMQPMessage(exchange: "", routingKey: queue, body: body, properties: properties, mandatory: mandatory)
    }
}
