import TestSupport
import Testing

/// Every test that talks to the broker is in this suite. `.usesBroker` lets them run alongside
/// broker tests of other targets while keeping them away from a test that restarts the broker.
@Suite("Against a real RabbitMQ", .usesBroker)
struct BrokerTests {}
