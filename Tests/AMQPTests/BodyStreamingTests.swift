import AMQP
import Foundation
import Synchronization
import TestSupport
import Testing

/// Keeps what it is given, fragment by fragment.
private final class Collector: AMQPBodyReceiver {
    let size: Int
    let properties: AMQPProperties
    private let state = Mutex<(bytes: [UInt8], fragments: Int)>(([], 0))

    init(properties: AMQPProperties, size: Int) {
        self.properties = properties
        self.size = size
    }

    func receive(_ fragment: RawSpan) {
        fragment.withUnsafeBytes { bytes in
            state.withLock { state in
                state.bytes.append(contentsOf: bytes)
                state.fragments += 1
            }
        }
    }

    var bytes: [UInt8] { state.withLock { $0.bytes } }
    var fragments: Int { state.withLock { $0.fragments } }
}

extension BrokerTests {
    @Suite("Streamed bodies")
    struct BodyStreamingTests {
        @Test("bodies over the threshold reach the receiver frame by frame, byte for byte; smaller ones arrive whole")
        func streamed() async throws {
            let queue = TestBroker.uniqueName("stream")
            let topology = AMQPTopology(queues: [.init(queue, arguments: TestBroker.expiry)])
            let publisher = try await TestBroker.publisher(topology: topology)
            let streaming = AMQPBodyStreaming(threshold: 1 << 20) { properties, size in Collector(properties: properties, size: size) }
            let consumer = try await AMQPConsumer.connect(
                try TestBroker.configuration(topology: topology), queue: queue, prefetch: 10, streaming: streaming)
            var large = [UInt8](repeating: 0, count: 3 * (1 << 20) + 12345)
            for index in large.indices { large[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 8) }
            let small = Array(repeating: UInt8(7), count: 1 << 20)
            try await publisher.publish(.toQueue(queue, body: large, properties: AMQPProperties(messageID: "large")))
            try await publisher.publish(.toQueue(queue, body: small, properties: AMQPProperties(messageID: "small")))
            var deliveries = consumer.makeAsyncIterator()

            let first = try #require(try await deliveries.next())
            let collector = try #require(first.streamedBody as? Collector)
            #expect(first.body.isEmpty)
            #expect(first.bodySize == large.count)
            #expect(collector.size == large.count)
            #expect(collector.properties.messageID == "large")
            #expect(collector.bytes == large)
            #expect(collector.fragments > 20, "a 3 MiB body comes in frames of at most 128 KiB")
            try await first.ack()

            let second = try #require(try await deliveries.next())
            #expect(second.streamedBody == nil)
            #expect(second.body == small)
            #expect(second.bodySize == small.count)
            try await second.ack()
            await consumer.close()
            await publisher.close()
        }
    }
}
