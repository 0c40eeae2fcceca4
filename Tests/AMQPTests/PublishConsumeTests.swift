import AMQP
import Foundation
import TestSupport
import Testing

extension BrokerTests {
    @Suite("Publishing and consuming")
    struct PublishConsumeTests {
        @Test("a message keeps its body, every property and nested headers through the broker")
        func roundTrip() async throws {
            let queue = TestBroker.uniqueName("roundtrip")
            let topology = AMQPTopology(queues: [.init(queue, arguments: TestBroker.expiry)])
            let publisher = try await TestBroker.publisher(topology: topology)
            let consumer = try await TestBroker.consumer(queue: queue)
            let headers: AMQPTable = [
                "string": "héllo",
                "bytes": .bytes([0, 255, 1]),
                "bool": true,
                "i8": .int8(-8), "u8": .uint8(200), "i16": .int16(-1600), "u16": .uint16(60000),
                "i32": .int32(-2_000_000), "u32": .uint32(4_000_000_000),
                "i64": .int64(-9_000_000_000), "u64": .uint64(18_000_000_000_000_000_000),
                "float": .float(1.5), "double": .double(-2.25),
                "decimal": .decimal(decimals: 2, value: 12345),
                "timestamp": .timestamp(1_700_000_000),
                "void": .void,
                "table": .table(["inner": .table(["deep": .array([1, "two", .table(["three": 3])])])]),
                "array": .array([.array([1, 2]), .table([:]), .array([])]),
            ]
            let properties = AMQPProperties(
                contentType: "application/json", contentEncoding: "identity", headers: headers, persistent: true,
                priority: 7, correlationID: "corr-1", replyTo: "reply.queue", expiration: "60000", messageID: "msg-1",
                timestamp: 1_700_000_123, type: "result", userID: "guest", appID: "pushworker-tests")
            let body = Array("{\"hello\": \"wörld\"}".utf8) + [0, 1, 2]
            try await publisher.publish(.toQueue(queue, body: body, properties: properties))

            let delivery = try await consumer.next()
            #expect(delivery.body == body)
            #expect(delivery.properties == properties)
            #expect(delivery.routingKey == queue)
            #expect(delivery.exchange == "")
            #expect(!delivery.redelivered)
            try await delivery.ack()
            await consumer.close()
            await publisher.close()
        }

        @Test("10,000 confirmed publishes are each consumed exactly once")
        func tenThousand() async throws {
            let queue = TestBroker.uniqueName("tenk")
            let topology = AMQPTopology(queues: [.durable(queue, quorum: true, extraArguments: TestBroker.expiry)])
            let publisher = try await TestBroker.publisher(topology: topology)
            let count = 10_000
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<50 {
                    group.addTask {
                        for index in stride(from: worker, to: count, by: 50) {
                            let properties = AMQPProperties(persistent: true, messageID: "\(index)")
                            try await publisher.publish(.toQueue(queue, body: Array("\(index)".utf8), properties: properties))
                        }
                    }
                }
                try await group.waitForAll()
            }
            let consumer = try await TestBroker.consumer(queue: queue, prefetch: 200)
            var seen = [Int](repeating: 0, count: count)
            for _ in 0..<count {
                let delivery = try await consumer.next()
                let index = try #require(Int(String(decoding: delivery.body, as: UTF8.self)))
                #expect(delivery.properties.messageID == "\(index)")
                seen[index] += 1
                try await delivery.ack()
            }
            #expect(seen.allSatisfy { $0 == 1 })
            // Nothing more is waiting: a further delivery would be a duplicate.
            await #expect(throws: TestFailure.self) { _ = try await consumer.next(within: .milliseconds(500)) }
            await publisher.close()
        }

        @Test("the broker never has more unacknowledged deliveries out than the prefetch")
        func prefetch() async throws {
            let queue = TestBroker.uniqueName("prefetch")
            let publisher = try await TestBroker.publisher(topology: AMQPTopology(queues: [.init(queue, arguments: TestBroker.expiry)]))
            for index in 0..<20 {
                try await publisher.publish(.toQueue(queue, body: Array("\(index)".utf8)))
            }
            let consumer = try await TestBroker.consumer(queue: queue, prefetch: 5)
            let collected = DeliveryCollector()
            let reader = Task {
                for try await delivery in consumer { await collected.add(delivery) }
            }
            // The prefetch's worth arrives (however slowly the machine runs), then nothing more
            // while none is acknowledged: a broken prefetch shows as a sixth within the pause.
            try await collected.waitFor(5)
            try await Task.sleep(for: .seconds(1))
            #expect(await collected.count == 5)
            for delivery in await collected.takeAll() { try await delivery.ack() }
            try await collected.waitFor(5)
            try await Task.sleep(for: .seconds(1))
            #expect(await collected.count == 5)
            for delivery in await collected.takeAll() { try await delivery.ack(multiple: false) }
            reader.cancel()
            await consumer.close()
            await publisher.close()
        }

        @Test("acking later deliveries never settles an earlier one still held")
        func acksDoNotCoverHeldDeliveries() async throws {
            let queue = TestBroker.uniqueName("coalesce")
            let topology = AMQPTopology(queues: [.durable(queue, quorum: true, extraArguments: TestBroker.expiry)])
            let publisher = try await TestBroker.publisher(topology: topology)
            for index in 0..<6 { try await publisher.publish(.toQueue(queue, body: [UInt8(index)])) }
            let consumer = try await TestBroker.consumer(queue: queue, prefetch: 6, topology: topology)
            var deliveries: [AMQPDelivery] = []
            for _ in 0..<6 { deliveries.append(try await consumer.next()) }
            // Hold 0 and 3; ack the rest at once, so they reach the I/O thread as one batch.
            let held = deliveries
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in [1, 2, 4, 5] { group.addTask { try await held[index].ack() } }
                try await group.waitForAll()
            }
            await consumer.close()

            let again = try await TestBroker.consumer(queue: queue, prefetch: 10, topology: topology)
            var redelivered: [UInt8] = []
            for _ in 0..<2 {
                let delivery = try await again.next()
                #expect(delivery.redelivered)
                redelivered.append(contentsOf: delivery.body)
                try await delivery.ack()
            }
            #expect(redelivered.sorted() == [0, 3])
            await #expect(throws: TestFailure.self) { _ = try await again.next(within: .milliseconds(500)) }
            await again.close()
            await publisher.close()
        }

        @Test("acks a quorum queue holds back (its leader stalled) take effect before the consumer closes: no acked delivery comes back")
        func heldBackAcksApplyBeforeClose() async throws {
            let queue = TestBroker.uniqueName("heldacks")
            let topology = AMQPTopology(queues: [.durable(queue, quorum: true, extraArguments: TestBroker.expiry)])
            let publisher = try await TestBroker.publisher(topology: topology)
            let count = 200
            try await publisher.publish(contentsOf: (0..<count).map { .toQueue(queue, body: Array("\($0)".utf8)) })
            var configuration = try TestBroker.configuration(topology: topology)
            // The close waits for the stalled leader, for as long as a rabbitmqctl call takes.
            configuration.cancelTimeout = .seconds(120)
            let consumer = try await AMQPConsumer.connect(configuration, queue: queue, prefetch: UInt16(count))
            var deliveries: [AMQPDelivery] = []
            for _ in 0..<count { deliveries.append(try await consumer.next()) }

            // With the queue's Raft leader suspended nothing is applied: past 32 settlements
            // waiting, the channel keeps the rest to itself, and RabbitMQ 3.10 drops those when the
            // channel closes (rabbitmq-server#10327). While the oldest delivery is held, no ack
            // may cover another: each is a frame, and a settlement, of its own. Without the
            // cancel the loss shows only in some runs: a channel that holds settlements back also
            // stops reading its socket for a while, so later acks may reach it after the resume.
            let vhost = configuration.addresses[0].vhost
            let leader = "{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<\"\(vhost)\">>, queue, <<\"\(queue)\">>)), Leader = amqqueue:get_pid(Q)"
            try await TestBroker.rabbitmqctl("eval", "\(leader), sys:suspend(Leader).")
            var resumed = false
            do {
                for delivery in deliveries.dropFirst() { try await delivery.ack() }
                try await deliveries[0].ack()
                let closing = Task { await consumer.close() }
                try await Task.sleep(for: .milliseconds(500))
                try await TestBroker.rabbitmqctl("eval", "\(leader), sys:resume(Leader).")
                resumed = true
                await closing.value
            } catch {
                if !resumed { try? await TestBroker.rabbitmqctl("eval", "\(leader), sys:resume(Leader).") }
                throw error
            }

            // Whatever the channel's close gave back is ready once the queue has taken the close.
            try await Task.sleep(for: .seconds(1))
            #expect(try await publisher.perform(.inspect(queue))?.messages == 0)
            try await publisher.perform(.delete(queue, ifEmpty: false))
            await publisher.close()
        }

        @Test("deleting the queue under a consumer ends its deliveries with 'consumerCancelled'")
        func brokerCancel() async throws {
            let queue = TestBroker.uniqueName("cancel")
            let consumer = try await TestBroker.consumer(queue: queue, topology: AMQPTopology(queues: [.init(queue, arguments: TestBroker.expiry)]))
            try await TestBroker.rabbitmqctl("delete_queue", queue)
            do {
                _ = try await consumer.next()
                Issue.record("the consumer went on after its queue was deleted")
            } catch let error as AMQPError {
                #expect(error.kind == .consumerCancelled)
                #expect(error.message.contains(queue))
            }
            await consumer.close()
        }

        @Test("consuming from a queue that does not exist fails with the broker's 404")
        func missingQueue() async throws {
            let queue = TestBroker.uniqueName("absent")
            do {
                _ = try await TestBroker.consumer(queue: queue)
                Issue.record("consumed from a missing queue")
            } catch let error as AMQPError {
                #expect(error.replyCode == 404)
                #expect(error.message.contains("consuming from queue '\(queue)'"))
            }
        }

        @Test("a mandatory publish no queue takes throws 'returned' with the broker's reply")
        func unroutable() async throws {
            let publisher = try await TestBroker.publisher()
            let missing = TestBroker.uniqueName("nobody")
            do {
                try await publisher.publish(.toQueue(missing, body: [1], properties: AMQPProperties(messageID: "m1")))
                Issue.record("an unroutable mandatory publish succeeded")
            } catch let error as AMQPError {
                #expect(error.kind == .returned)
                #expect(error.replyCode == 312)
                #expect(error.replyText == "NO_ROUTE")
                #expect(error.message.contains(missing))
            }
            // The same publisher goes on working, and a non-mandatory publish is simply dropped.
            try await publisher.publish(.toQueue(missing, body: [1], mandatory: false))
            await publisher.close()
        }

        @Test("a message with a field longer than AMQP allows fails by name; the publishes before and after it arrive, a large one too")
        func fieldTooLong() async throws {
            let queue = TestBroker.uniqueName("toolong")
            let publisher = try await TestBroker.publisher(topology: AMQPTopology(queues: [.init(queue, arguments: TestBroker.expiry)]))
            let consumer = try await TestBroker.consumer(queue: queue)
            // One publish more than a frame holds goes through the library, between the others.
            let large = [UInt8](repeating: 5, count: 300_000)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await publisher.publish(.toQueue(queue, body: [1], properties: AMQPProperties(messageID: "before"))) }
                group.addTask {
                    do {
                        try await publisher.publish(.toQueue(queue, body: [2], properties: AMQPProperties(correlationID: String(repeating: "c", count: 300))))
                        Issue.record("a 300-byte correlation_id was published")
                    } catch let error as AMQPError {
                        #expect(error.kind == .library)
                        #expect(error.message.contains("its correlation_id is 300 bytes long; AMQP allows at most 255"))
                        #expect(error.message.contains("routing key '\(queue)'"))
                    }
                }
                group.addTask { try await publisher.publish(.toQueue(queue, body: large, properties: AMQPProperties(messageID: "large"))) }
                group.addTask { try await publisher.publish(.toQueue(queue, body: [3], properties: AMQPProperties(messageID: "after"))) }
                try await group.waitForAll()
            }
            var seen: [String: Int] = [:]
            for _ in 0..<3 {
                let delivery = try await consumer.next()
                seen[delivery.properties.messageID ?? "?"] = delivery.body.count
                try await delivery.ack()
            }
            #expect(seen == ["before": 1, "large": 300_000, "after": 1])
            await #expect(throws: TestFailure.self) { _ = try await consumer.next(within: .milliseconds(300)) }
            await consumer.close()
            await publisher.close()
        }

        @Test("publishing to a missing exchange fails with the broker's 404, and the publisher recovers")
        func missingExchange() async throws {
            let queue = TestBroker.uniqueName("recover")
            let publisher = try await TestBroker.publisher(topology: AMQPTopology(queues: [.init(queue, arguments: TestBroker.expiry)]))
            do {
                try await publisher.publish(AMQPMessage(exchange: "no.such.exchange", routingKey: "x", body: [1]))
                Issue.record("publishing to a missing exchange succeeded")
            } catch let error as AMQPError {
                #expect(error.isRetryable)
                #expect(error.replyCode == 404)
                #expect(error.replyText?.contains("no.such.exchange") == true)
            }
            try await withTimeout(.seconds(10), "publishing after the channel error") {
                try await publisher.publish(.toQueue(queue, body: [2]))
            }
            await publisher.close()
        }

        // The broker's own heartbeats wake the I/O thread's poll too, so this checks that an idle
        // connection is kept (frames read, heartbeats answered), not our send timer on its own.
        @Test("an idle connection with a 1 s heartbeat stays up: a delivery taken before is still ackable")
        func heartbeats() async throws {
            let queue = TestBroker.uniqueName("heartbeat")
            var configuration = try TestBroker.configuration(topology: AMQPTopology(queues: [.init(queue, arguments: TestBroker.expiry)]))
            configuration.heartbeat = .seconds(1)
            let publisher = try await AMQPPublisher.connect(configuration)
            let consumer = try await AMQPConsumer.connect(configuration, queue: queue, prefetch: 1)
            try await publisher.publish(.toQueue(queue, body: [42]))
            let delivery = try await consumer.next()
            try await Task.sleep(for: .seconds(4))
            // A heartbeat timeout would have replaced the connection and made this stale.
            try await delivery.ack()
            try await publisher.publish(.toQueue(queue, body: [43]))
            let next = try await consumer.next()
            #expect(next.body == [43])
            #expect(!next.redelivered)
            try await next.ack()
            await consumer.close()
            await publisher.close()
        }
    }
}

/// Collects deliveries from a consuming task so the test can look at them.
actor DeliveryCollector {
    private var deliveries: [AMQPDelivery] = []
    func add(_ delivery: AMQPDelivery) { deliveries.append(delivery) }
    var count: Int { deliveries.count }

    /// Returns once `count` deliveries are in; fails when none has come for `stall`.
    func waitFor(_ count: Int, stall: Duration = .seconds(30)) async throws {
        var seen = deliveries.count, lastProgress = ContinuousClock.now
        while deliveries.count < count {
            if deliveries.count > seen { (seen, lastProgress) = (deliveries.count, ContinuousClock.now) }
            guard ContinuousClock.now - lastProgress < stall else { throw TestFailure("\(deliveries.count) of \(count) deliveries, none for \(stall)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func takeAll() -> [AMQPDelivery] {
        defer { deliveries.removeAll() }
        return deliveries
    }
}
