import AMQP
import ArgumentParser
import CommandLineSupport
import Foundation

/// Publishing and consuming throughput through a durable quorum queue, the kind push.jobs is.
/// Pipelined confirms are what make a worker fast; the one-at-a-time run shows how much.
struct AMQPBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "amqp",
        abstract: "Confirmed publishing (pipelined and one at a time) and consuming, in messages per second.")

    @OptionGroup var amqp: AMQPOptions

    @Option(help: "Messages to publish pipelined, then consume.")
    var count = 100_000

    @Option(help: "Body size in bytes.")
    var size = 256

    @Option(help: "Publishes in flight at once in the pipelined run.")
    var inFlight = 1000

    @Option(help: "Consumer prefetch.")
    var prefetch: UInt16 = 100

    @Option(name: .customLong("serial-count"), help: "Messages for the one-at-a-time run (default: count/20, at least 500).")
    var serialCount: Int?

    func validate() throws {
        guard count > 0 else { throw ValidationError("--count must be positive") }
        guard size >= 0 else { throw ValidationError("--size must not be negative") }
        guard inFlight > 0 else { throw ValidationError("--in-flight must be positive") }
    }

    func run() async throws {
        let queue = "pushworker.bench.\(UUID().uuidString.prefix(8).lowercased())"
        var configuration = try amqp.configuration()
        configuration.connectionName = "pushworker-bench amqp"
        configuration.maxUnconfirmedPublishes = max(configuration.maxUnconfirmedPublishes, inFlight)
        // The queue deletes itself a minute after the benchmark stops using it.
        configuration.topology = AMQPTopology(queues: [.durable(queue, quorum: true, extraArguments: ["x-expires": .int64(60_000)])])
        let publisher = try await AMQPPublisher.connect(configuration)
        let consumer = try await AMQPConsumer.connect(configuration, queue: queue, prefetch: prefetch)
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: size)
        let message = AMQPMessage.toQueue(queue, body: body, properties: AMQPProperties(contentType: "application/octet-stream", persistent: true))
        let serial = serialCount ?? max(count / 20, 500)
        print("queue \(queue) (quorum, durable), \(size)-byte persistent messages, broker \(configuration.redactedURL)")

        let pipelined = try await measure {
            try await publishPipelined(message, count: count, lanes: min(inFlight, count), publisher: publisher)
        }
        report("pipelined confirmed publish", count: count, seconds: pipelined, detail: "\(min(inFlight, count)) in flight")

        let consumed = try await measure { try await consume(count, from: consumer) }
        report("consume and ack", count: count, seconds: consumed, detail: "prefetch \(prefetch)")

        let oneAtATime = try await measure {
            for _ in 0..<serial { try await publisher.publish(message) }
        }
        report("one-at-a-time confirmed publish", count: serial, seconds: oneAtATime, detail: "each waits for its confirm")
        try await consume(serial, from: consumer)

        let pipelinedRate = Double(count) / pipelined
        let serialRate = Double(serial) / oneAtATime
        let consumeRate = Double(count) / consumed
        print(String(format: "ratio pipelined/one-at-a-time publish: %.1fx (target >= 10x)", pipelinedRate / serialRate))
        print(String(format: "ratio consume/pipelined publish: %.2fx (target >= 1x)", consumeRate / pipelinedRate))
        await consumer.close()
        await publisher.close()
    }

    private func publishPipelined(_ message: AMQPMessage, count: Int, lanes: Int, publisher: AMQPPublisher) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    for _ in stride(from: lane, to: count, by: lanes) { try await publisher.publish(message) }
                }
            }
            try await group.waitForAll()
        }
    }

    private func consume(_ count: Int, from consumer: AMQPConsumer) async throws {
        var received = 0
        for try await delivery in consumer {
            try await delivery.ack()
            received += 1
            if received == count { return }
        }
        throw CommandFailure("the consumer stopped after \(received) of \(count) messages")
    }

    private func measure(_ body: () async throws -> Void) async throws -> Double {
        let start = ContinuousClock.now
        try await body()
        return (ContinuousClock.now - start) / .seconds(1)
    }

    private func report(_ what: String, count: Int, seconds: Double, detail: String) {
        print(String(format: "%@: %d messages in %.2f s = %.0f msg/s (%@)", what, count, seconds, Double(count) / seconds, detail))
    }
}

