import AMQP
import Foundation
import TestSupport
import Testing

@Suite("pushworker tail", .usesBroker)
struct TailCommandTests {
    /// A queue holding `count` messages, their bodies `message-N`.
    private func queue(holding count: Int) async throws -> (name: String, topology: AMQPTopology) {
        let name = TestBroker.uniqueName("tail")
        let topology = AMQPTopology(queues: [.durable(name, quorum: true, extraArguments: TestBroker.expiry)])
        let publisher = try await TestBroker.publisher(topology: topology)
        for index in 0..<count {
            try await publisher.publish(.toQueue(name, body: Array("message-\(index)".utf8), properties: AMQPProperties(persistent: true)))
        }
        await publisher.close()
        return (name, topology)
    }

    /// The message numbers in `text` (tail's output).
    private func printed(_ text: String) -> [Int] {
        text.split(separator: "\n").compactMap { line in line.range(of: "message-").flatMap { Int(line[$0.upperBound...]) } }
    }

    /// The message numbers still in the queue, removed; `expected` of them, or as many as come
    /// before a quiet spell long enough for a loaded machine (that the broker put back what tail
    /// held when it stopped).
    private func remaining(_ queue: String, _ topology: AMQPTopology, expected: Int) async throws -> [Int] {
        let consumer = try await TestBroker.consumer(queue: queue, topology: topology)
        var numbers: [Int] = []
        while numbers.count < expected, let delivery = try? await consumer.next(within: .seconds(10)) {
            try await delivery.ack()
            numbers += printed(String(decoding: delivery.body, as: UTF8.self))
        }
        await consumer.close()
        return numbers
    }

    @Test("output to a file, stopped by SIGTERM: every message removed from the queue is in the file")
    func toFileStoppedBySignal() async throws {
        let (queue, topology) = try await queue(holding: 5)
        // Standard output is a file, as in `pushworker tail … > out`.
        let tail = try RunningProgram(Program.executable, arguments: ["tail", "--amqp", TestBroker.url, "--queue", queue, "--idle", "60"])
        try await tail.waitForLog("message-4")
        #expect(try await tail.stop(signal: SIGTERM) == 0, "\(tail.log)")
        #expect(printed(tail.log).sorted() == [0, 1, 2, 3, 4], "\(tail.log)")
        #expect(try await remaining(queue, topology, expected: 1).isEmpty)
    }

    @Test("SIGINT while messages stream: each message is either printed or still in the queue, never both, never neither")
    func interruptedMidStream() async throws {
        let count = 400
        let (queue, topology) = try await queue(holding: count)
        let tail = try RunningProgram(Program.executable, arguments: ["tail", "--amqp", TestBroker.url, "--queue", queue, "--idle", "60"])
        try await tail.waitForLog("message-20")
        #expect(try await tail.stop(signal: SIGINT) == 0, "\(tail.log)")
        let shown = printed(tail.log)
        let left = try await remaining(queue, topology, expected: count - shown.count)
        #expect(Set(shown).count == shown.count, "printed twice")
        #expect(Set(shown).isDisjoint(with: left), "printed and still queued: \(Set(shown).intersection(left).sorted())")
        #expect((shown + left).sorted() == Array(0..<count), "lost: \(Set(0..<count).subtracting(shown + left).sorted())")
    }

    @Test("a results message (results: batched) is printed as one [result] line per device, as results: all would be")
    func batchedResults() async throws {
        let name = TestBroker.uniqueName("tail")
        let topology = AMQPTopology(queues: [.durable(name, quorum: true, extraArguments: TestBroker.expiry)])
        let publisher = try await TestBroker.publisher(topology: topology)
        let batch = #"{"app":"demo","chunk":null,"job_id":"j","results":[{"token":"aa","outcome":"delivered"},{"token":"bb","outcome":"rejected"}]}"#
        try await publisher.publish(.toQueue(name, body: Array(batch.utf8), properties: AMQPProperties(persistent: true, correlationID: "j", type: "results")))
        try await publisher.publish(.toQueue(name, body: Array(#"{"job_id":"j"}"#.utf8), properties: AMQPProperties(persistent: true, type: "summary")))
        await publisher.close()
        let run = try await Program.running(["tail", "--amqp", TestBroker.url, "--queue", name, "--count", "2", "--idle", "30"])
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardOutput.split(separator: "\n") == [
            #"[result] {"outcome":"delivered","token":"aa"}"#, #"[result] {"outcome":"rejected","token":"bb"}"#, #"[summary] {"job_id":"j"}"#,
        ], "\(run.standardOutput)")
    }
}
