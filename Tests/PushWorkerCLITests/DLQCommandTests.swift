import AMQP
import Foundation
import PushWorker
import TestSupport
import Testing

@Suite("pushworker dlq", .usesBroker)
struct DLQCommandTests {
    @Test("list, dry-run replay, replay by error code, show and purge move exactly the selected dead letters")
    func lifecycle() async throws {
        let dead = TestBroker.uniqueName("dead")
        let target = TestBroker.uniqueName("replayed")
        let topology = AMQPTopology(queues: [.durable(dead, quorum: true, extraArguments: TestBroker.expiry), .durable(target, quorum: true, extraArguments: TestBroker.expiry)])
        let publisher = try await TestBroker.publisher(topology: topology)
        for (id, code) in [("a1", "invalid_field"), ("a2", "invalid_field"), ("a3", "invalid_field"), ("b1", "unknown_app"), ("b2", "unknown_app")] {
            let headers: AMQPTable = ["x-pushworker-error": .string(code), "x-pushworker-error-message": .string("\(code) for \(id)"), "producer": "test"]
            try await publisher.publish(.toQueue(dead, body: Array(#"{"job": "\#(id)"}"#.utf8), properties: AMQPProperties(headers: headers, persistent: true, messageID: id)))
        }
        let base = ["--amqp", TestBroker.url, "--queue", dead]
        func list() async throws -> [String: String] {
            let result = try await Program.running(["dlq", "list", "--json"] + base)
            #expect(result.status == 0, "\(result.standardError)")
            var codes: [String: String] = [:]
            for line in result.standardOutput.split(separator: "\n") {
                let listing = try JSONDecoder().decode(DeadLetter.Listing.self, from: Data(line.utf8))
                codes[listing.id] = listing.error
            }
            return codes
        }
        #expect(try await list() == ["a1": "invalid_field", "a2": "invalid_field", "a3": "invalid_field", "b1": "unknown_app", "b2": "unknown_app"])

        let dry = try await Program.running(["dlq", "replay", "--error", "unknown_app", "--dry-run", "--to", target] + base)
        #expect(dry.status == 0, "\(dry.standardError)")
        #expect(dry.standardOutput.contains("would replay b1") && dry.standardOutput.contains("dry run: nothing moved"))
        #expect(try await list().count == 5)

        let replay = try await Program.running(["dlq", "replay", "--error", "unknown_app", "--to", target] + base)
        #expect(replay.standardOutput.contains("replayed 2"), "\(replay.standardOutput)\(replay.standardError)")
        #expect(try await list().keys.sorted() == ["a1", "a2", "a3"])
        let replayed = try await TestBroker.consumer(queue: target, topology: topology)
        var ids: Set<String> = []
        for _ in 0..<2 {
            let delivery = try await replayed.next()
            try await delivery.ack()
            ids.insert(delivery.properties.messageID ?? "")
            #expect(delivery.properties.headers?["x-pushworker-replays"]?.intValue == 1)
            // The reason moves aside: the next death, if any, is the one shown, and this one stays as the first.
            #expect(delivery.properties.headers?["x-pushworker-error"] == nil)
            #expect(delivery.properties.headers?["x-pushworker-first-error"] == "unknown_app")
            #expect(delivery.properties.headers?["producer"] == "test")
        }
        #expect(ids == ["b1", "b2"])
        await #expect(throws: TestFailure.self) { _ = try await replayed.next(within: .milliseconds(500)) }
        await replayed.close()

        let show = try await Program.running(["dlq", "show", "a2"] + base)
        #expect(show.standardOutput.contains(#"{"job": "a2"}"#) && show.standardOutput.contains("invalid_field for a2"))
        let refused = try await Program.running(["dlq", "purge", "--id", "a1"] + base)
        #expect(refused.status != 0 && refused.standardError.contains("--yes"))
        let purge = try await Program.running(["dlq", "purge", "--id", "a1", "--yes"] + base)
        #expect(purge.standardOutput.contains("purged 1"))
        #expect(try await list().keys.sorted() == ["a2", "a3"])
        let nothing = try await Program.running(["dlq", "replay"] + base)
        #expect(nothing.status == 64 && nothing.standardError.contains("--id, --error or --all"))
        await publisher.close()
    }
}
