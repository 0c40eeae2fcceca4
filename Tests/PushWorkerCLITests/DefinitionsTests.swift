import AMQP
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// `deploy/rabbitmq/definitions.json`, the topology for operators who declare it ahead of the
/// workers: it matches what a worker declares, it loads into a fresh broker (here a vhost of its
/// own), and a worker then starts on it with no redeclaration error and serves a job.
@Suite("RabbitMQ definitions", .usesBroker)
struct DefinitionsTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../deploy/rabbitmq/definitions.json").standardized

    static func definitions() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
    }

    @Test("every queue, exchange and binding a worker with a registry declares is in the file, with the same arguments")
    func matchesTheWorker() throws {
        let definitions = try Self.definitions()
        var settings = WorkerSettings()
        settings.registry = .init(sqlite: "registry.db")
        let topology = settings.topology
        let queues = Dictionary(uniqueKeysWithValues: (definitions["queues"] as? [[String: Any]] ?? []).map { ($0["name"] as? String ?? "", $0) })
        #expect(Set(queues.keys) == Set(topology.queues.map(\.name)))
        for queue in topology.queues {
            let arguments = queues[queue.name]?["arguments"] as? [String: Any] ?? [:]
            #expect(Set(arguments.keys) == Set(queue.arguments.keys), "\(queue.name)")
            for (key, value) in queue.arguments {
                let expected = value.stringValue ?? value.intValue.map { "\($0)" } ?? "?"
                #expect("\(arguments[key] ?? "missing")" == expected, "\(queue.name) \(key)")
            }
            #expect(queues[queue.name]?["durable"] as? Bool == true)
        }
        let exchanges = (definitions["exchanges"] as? [[String: Any]] ?? []).map { "\($0["name"] ?? "") \($0["type"] ?? "")" }
        #expect(Set(exchanges) == Set(topology.exchanges.map { "\($0.name) \($0.type)" }))
        let bindings = (definitions["bindings"] as? [[String: Any]] ?? []).map { "\($0["source"] ?? "")→\($0["destination"] ?? "") \($0["routing_key"] ?? "")" }
        #expect(Set(bindings) == Set(topology.bindings.map { "\($0.exchange)→\($0.queue) \($0.routingKey)" }))
    }

    @Test("imported into a fresh vhost with rabbitmqctl import_definitions, a worker starts on it and a job gets its result")
    func workerStartsOnIt() async throws {
        // The file as an operator would load it, aimed at a vhost of this test's own.
        let vhost = "defs-\(UUID().uuidString.prefix(8).lowercased())"
        var text = try String(contentsOf: Self.file, encoding: .utf8)
        text = text.replacingOccurrences(of: #""vhost": "/""#, with: #""vhost": "\#(vhost)""#)
            .replacingOccurrences(of: #""name": "/""#, with: #""name": "\#(vhost)""#)
        var definitions = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        definitions["permissions"] = [["user": "guest", "vhost": vhost, "configure": ".*", "write": ".*", "read": ".*"]]
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(vhost).json")
        try JSONSerialization.data(withJSONObject: definitions).write(to: file)
        try await TestBroker.rabbitmqctl("import_definitions", file.path)
        defer { Task { try? await TestBroker.rabbitmqctl("delete_vhost", vhost) } }

        let url = TestBroker.url.replacingOccurrences(of: #"/+$"#, with: "", options: .regularExpression) + "/\(vhost)"
        var amqp = try AMQPConfiguration(url: url)
        amqp.connectTimeout = .seconds(3)
        // The import runs in the background: wait until every queue of the file is there. A node
        // busy with other tests' quorum queues may fail to elect one's leader in time ("failed to
        // form new cluster" in its log) and go on without it; the import is then run again, as an
        // operator would, since importing what is there already changes nothing.
        let names = (definitions["queues"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(names.contains("push.registry"))
        var publisher: AMQPPublisher?
        var missing = names
        var imports = 1
        var importedAt = ContinuousClock.now
        while publisher == nil {
            if let connected = try? await AMQPPublisher.connect(amqp) {
                var absent: [String] = []
                for name in names where (try? await connected.queueExists(name)) != true { absent.append(name) }
                if absent.isEmpty { publisher = connected; break }
                await connected.close()
                if absent.count < missing.count { importedAt = .now }
                missing = absent
            }
            if ContinuousClock.now - importedAt > .seconds(60) {
                try #require(imports < 4, "\(imports) imports left \(missing) out; the broker's log says why")
                try await TestBroker.rabbitmqctl("import_definitions", file.path)
                imports += 1
                importedAt = .now
            }
            try await Task.sleep(for: .milliseconds(500))
        }
        let fixture = try await MockAPNsFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let registry = FileManager.default.temporaryDirectory.appendingPathComponent("\(vhost).db").path
        // Default queue names, as the file has them.
        let config = try MockAPNsFixture.writeConfiguration("""
            amqp:
              url: \(url)
            registry: {sqlite: \(registry)}
            apps:
            \(fixture.appYAML())
            """)
        let worker = try RunningProgram.worker(config: config)
        try await worker.waitForLog("registry commands consumed")
        let results = try await AMQPConsumer.connect(amqp, queue: "push.results", prefetch: 10)
        let token = String(repeating: "ab", count: 32)
        try await publisher?.publish(AMQPMessage(
            exchange: "push", routingKey: "jobs", body: Array(#"{"id": "defs", "audience": {"tokens": ["\#(token)"]}, "payload": {"aps": {}}}"#.utf8),
            properties: AMQPProperties(persistent: true), mandatory: true))
        var outcome: String?
        while outcome == nil {
            let delivery = try await results.next(within: .seconds(30))
            try await delivery.ack()
            if case .result(let result) = try Reply(delivery) { outcome = result.outcome.rawValue }
        }
        #expect(outcome == "delivered")
        #expect(try await worker.stop() == 0, "\(worker.log)")
        #expect(!worker.log.contains("PRECONDITION_FAILED"), "\(worker.log)")
        await results.close()
        await publisher?.close()
    }
}
