import AMQP
import Foundation
import TestSupport
import Testing

/// Not inside `BrokerTests`: it needs the broker to itself, not a share of it.
@Suite("Broker restart", .heavy, .restartsBroker)
struct BrokerRestartTests {
    @Test("stop_app/start_app mid-stream: both sides reconnect and no confirmed message is missing")
    func restartMidStream() async throws {
        let queue = TestBroker.uniqueName("restart")
        let topology = AMQPTopology(queues: [.durable(queue, quorum: true)])
        let publisher = try await TestBroker.publisher(topology: topology)
        let consumer = try await TestBroker.consumer(queue: queue, prefetch: 50, topology: topology)
        let confirmed = Locked(Set<Int>())
        let received = Locked(Set<Int>())
        let retried = Locked(0)

        // One delivery held unacknowledged across the restart, to settle afterwards.
        try await publisher.publish(.toQueue(queue, body: Array("held".utf8), properties: AMQPProperties(persistent: true)))
        let held = try await consumer.next()

        let consuming = Task {
            for try await delivery in consumer {
                if let index = Int(String(decoding: delivery.body, as: UTF8.self)) {
                    received.withLock { _ = $0.insert(index) }
                }
                // An ack lost with the old connection only means the message comes again.
                try? await delivery.ack()
            }
        }
        let total = 4000
        let lanes = 8
        let publishing = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<lanes {
                    group.addTask {
                        for index in stride(from: lane, to: total, by: lanes) {
                            let message = AMQPMessage.toQueue(queue, body: Array("\(index)".utf8), properties: AMQPProperties(persistent: true, messageID: "\(index)"))
                            while true {
                                do {
                                    try await publisher.publish(message)
                                    confirmed.withLock { _ = $0.insert(index) }
                                    break
                                } catch let error as AMQPError where error.isRetryable {
                                    retried.withLock { $0 += 1 }
                                    try await Task.sleep(for: .milliseconds(50))
                                }
                            }
                            try await Task.sleep(for: .milliseconds(10))
                        }
                    }
                }
                try await group.waitForAll()
            }
        }

        // Stopped once the stream is under way, however slowly a loaded machine publishes.
        let deadline = ContinuousClock.now + .seconds(60)
        while confirmed.withLock({ $0.count }) < 50 {
            guard ContinuousClock.now < deadline else { throw TestFailure("no 50 publishes confirmed within 60 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let confirmedBeforeStop = confirmed.withLock { $0.count }
        try await TestBroker.rabbitmqctl("stop_app")
        try await Task.sleep(for: .seconds(1))
        try await TestBroker.rabbitmqctl("start_app")
        try await TestBroker.rabbitmqctl("await_startup")

        try await withTimeout(.seconds(120), "publishing through the restart") { try await publishing.value }
        #expect(confirmedBeforeStop > 0 && confirmedBeforeStop < total, "the restart should fall mid-stream (\(confirmedBeforeStop) confirmed before it)")
        #expect(confirmed.withLock { $0.count } == total)

        let arrival = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < arrival {
            if confirmed.value.isSubset(of: received.value) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let missing = confirmed.value.subtracting(received.value)
        #expect(missing.isEmpty, "\(missing.count) confirmed messages never arrived, e.g. \(missing.sorted().prefix(10))")

        // The delivery taken before the restart belongs to a dead connection.
        do {
            try await held.ack()
            Issue.record("acknowledged a delivery from a dead connection")
        } catch let error as AMQPError {
            #expect(error.kind == .staleDelivery)
        }
        consuming.cancel()
        await consumer.close()
        await publisher.close()
    }
}
