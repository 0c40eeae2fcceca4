import AMQP
import Foundation
import TestSupport
import Testing

extension BrokerTests {
    @Suite("Dead-lettering")
    struct DeadLetterTests {
        /// A work queue that dead-letters through `dlx` into `dead`.
        private func topology(work: String, dead: String, dlx: String, quorum: Bool, deliveryLimit: Int? = nil) -> AMQPTopology {
            AMQPTopology(
                exchanges: [.init(dlx, type: "fanout", durable: false, autoDelete: true)],
                queues: [
                    .durable(work, quorum: quorum, deliveryLimit: deliveryLimit, deadLetterExchange: dlx, extraArguments: TestBroker.expiry),
                    .init(dead, arguments: TestBroker.expiry),
                ],
                bindings: [.init(queue: dead, exchange: dlx, routingKey: "")])
        }

        @Test("a nack without requeue lands in the dead-letter queue with x-death")
        func nackDeadLetters() async throws {
            let (work, dead, dlx) = (TestBroker.uniqueName("work"), TestBroker.uniqueName("dead"), TestBroker.uniqueName("dlx"))
            let topology = topology(work: work, dead: dead, dlx: dlx, quorum: false)
            let publisher = try await TestBroker.publisher(topology: topology)
            try await publisher.publish(.toQueue(work, body: Array("poison".utf8), properties: AMQPProperties(headers: ["x-pushworker-error": "invalid_json"], messageID: "p1")))

            let consumer = try await TestBroker.consumer(queue: work, topology: topology)
            let delivery = try await consumer.next()
            try await delivery.nack(requeue: false)

            let deadConsumer = try await TestBroker.consumer(queue: dead, topology: topology)
            let deadLetter = try await deadConsumer.next()
            #expect(deadLetter.body == Array("poison".utf8))
            #expect(deadLetter.properties.messageID == "p1")
            #expect(deadLetter.properties.headers?["x-pushworker-error"] == "invalid_json")
            let death = try #require(deadLetter.deaths.first)
            #expect(death["queue"] == .string(work))
            #expect(death["reason"] == "rejected")
            #expect(death["count"]?.intValue == 1)
            #expect(death["routing-keys"] == .array([.string(work)]))
            if case .timestamp = death["time"] {} else { Issue.record("x-death time is \(String(describing: death["time"]))") }
            try await deadLetter.ack()
            await deadConsumer.close()
            await consumer.close()
            await publisher.close()
        }

        @Test("a quorum queue's delivery limit dead-letters a message that keeps being requeued")
        func deliveryLimit() async throws {
            let (work, dead, dlx) = (TestBroker.uniqueName("quorum"), TestBroker.uniqueName("dead"), TestBroker.uniqueName("dlx"))
            let topology = topology(work: work, dead: dead, dlx: dlx, quorum: true, deliveryLimit: 2)
            let publisher = try await TestBroker.publisher(topology: topology)
            try await publisher.publish(.toQueue(work, body: Array("crash me".utf8), properties: AMQPProperties(persistent: true, messageID: "poison")))

            let consumer = try await TestBroker.consumer(queue: work, prefetch: 1, topology: topology)
            // The first delivery and two redeliveries; the broker then gives up on the message.
            for attempt in 0..<3 {
                let delivery = try await consumer.next()
                #expect(delivery.properties.messageID == "poison")
                #expect(delivery.redelivered == (attempt > 0))
                try await delivery.nack(requeue: true)
            }
            let deadConsumer = try await TestBroker.consumer(queue: dead, topology: topology)
            let deadLetter = try await deadConsumer.next()
            #expect(deadLetter.properties.messageID == "poison")
            #expect(deadLetter.deaths.first?["reason"] == "delivery_limit")
            #expect(deadLetter.deaths.first?["queue"] == .string(work))
            try await deadLetter.ack()
            await #expect(throws: TestFailure.self) { _ = try await consumer.next(within: .milliseconds(500)) }
            await deadConsumer.close()
            await consumer.close()
            await publisher.close()
        }
    }
}
