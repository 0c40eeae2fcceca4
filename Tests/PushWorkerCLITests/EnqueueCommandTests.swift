import AMQP
import Foundation
import TestSupport
import Testing

@Suite("pushworker enqueue", .usesBroker)
struct EnqueueCommandTests {
    private func queueTopology(_ queue: String) -> AMQPTopology {
        AMQPTopology(queues: [.durable(queue, quorum: true, extraArguments: TestBroker.expiry)])
    }

    @Test("a JSON file is published persistent, as application/json, under the printed message id")
    func fromFile() async throws {
        let queue = TestBroker.uniqueName("enqueue")
        let consumer = try await TestBroker.consumer(queue: queue, topology: queueTopology(queue))
        let document = #"{"app": "demo", "audience": {"tokens": ["0a1b"]}, "payload": {"aps": {"alert": "hi"}}}"#
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(queue).json")
        try Data(document.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }

        let result = try await Program.running(["enqueue", "--amqp", TestBroker.url, "--queue", queue, "--file", file.path])
        #expect(result.status == 0, "\(result.standardError)")
        let id = result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(UUID(uuidString: id) != nil, "printed '\(id)'")

        let delivery = try await consumer.next()
        #expect(delivery.body == Array(document.utf8))
        #expect(delivery.properties.messageID == id)
        #expect(delivery.properties.contentType == "application/json")
        #expect(delivery.properties.persistent == true)
        #expect(delivery.properties.timestamp != nil)
        try await delivery.ack()
        await consumer.close()
    }

    @Test("standard input through an exchange and routing key, with a chosen message id")
    func fromStandardInput() async throws {
        let queue = TestBroker.uniqueName("enqueue")
        let exchange = TestBroker.uniqueName("push")
        var topology = queueTopology(queue)
        topology.exchanges = [.init(exchange, type: "topic", durable: false, autoDelete: true)]
        topology.bindings = [.init(queue: queue, exchange: exchange, routingKey: "jobs")]
        let consumer = try await TestBroker.consumer(queue: queue, topology: topology)

        let result = try await Program.running(
            ["enqueue", "--amqp", TestBroker.url, "--exchange", exchange, "--routing-key", "jobs", "--message-id", "job-42"],
            input: Data("[1, 2, 3]\n".utf8))
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == "job-42\n")
        let delivery = try await consumer.next()
        #expect(delivery.properties.messageID == "job-42")
        #expect(delivery.body == Array("[1, 2, 3]\n".utf8))
        try await delivery.ack()
        await consumer.close()
    }

    @Test("input that is not JSON is refused with its line and column, and nothing is published")
    func notJSON() async throws {
        let queue = TestBroker.uniqueName("enqueue")
        let consumer = try await TestBroker.consumer(queue: queue, topology: queueTopology(queue))
        let result = try await Program.running(
            ["enqueue", "--amqp", TestBroker.url, "--queue", queue],
            input: Data("{\n  \"app\": \"demo\",\n  \"payload\": {aps: 1}\n}".utf8))
        #expect(result.status != 0)
        #expect(result.standardError.contains("standard input is not valid JSON at line 3, column 15"), "\(result.standardError)")
        #expect(result.standardError.contains("nothing was published"))
        #expect(result.standardOutput.isEmpty)
        await #expect(throws: TestFailure.self) { _ = try await consumer.next(within: .seconds(1)) }
        await consumer.close()
    }

    @Test("a queue that does not exist is an error, not a silent loss")
    func missingQueue() async throws {
        let result = try await Program.running(["enqueue", "--amqp", TestBroker.url, "--queue", TestBroker.uniqueName("nowhere")], input: Data("{}".utf8))
        #expect(result.status != 0)
        #expect(result.standardError.contains("no queue took the mandatory message"), "\(result.standardError)")
        #expect(result.standardError.contains("NO_ROUTE"))
    }

    @Test("contradictory destinations are a usage error")
    func usage() async throws {
        let both = try await Program.running(["enqueue", "--queue", "q", "--exchange", "e", "--routing-key", "k"])
        #expect(both.status == 64)
        #expect(both.standardError.contains("either --queue, or --exchange with --routing-key"))
        let neither = try await Program.running(["enqueue"])
        #expect(neither.status == 64)
        #expect(neither.standardError.contains("say where to publish"))
    }

    @Test("a bad broker URL is reported without its password")
    func badURL() async throws {
        let result = try await Program.running(["enqueue", "--amqp", "amqp://me:s3cret@localhost:70000/", "--queue", "q"], input: Data("{}".utf8))
        #expect(result.status != 0)
        #expect(result.standardError.contains("port 70000 is out of range"), "\(result.standardError)")
        #expect(!result.standardError.contains("s3cret"))
    }
}
