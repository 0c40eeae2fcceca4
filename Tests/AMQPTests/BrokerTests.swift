import Testing

/// Every test that talks to the broker runs in this suite, one at a time: one of them restarts
/// the broker, which would break whatever else was running.
@Suite("Against a real RabbitMQ", .serialized)
struct BrokerTests {}
