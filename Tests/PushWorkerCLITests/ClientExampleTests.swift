import APNs
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// The producers under docs/clients, run as a team's backend would run them: against the real
/// broker and a `pushworker run` worker, reading their results back by `correlation_id`.
@Suite("producer examples in docs/clients, against the broker and a worker", .usesBroker)
struct ClientExampleTests {
    enum Language: String, Sendable, CaseIterable {
        case python, go, ruby, php, node
    }

    static let clients = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/clients")

    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xC11E_0000) }

    /// amqplib comes from the npm registry, which this project's machines cannot reach; with
    /// `npm ci` run in docs/clients/node, the Node.js example runs like the others.
    static let nodeAmqplibInstalled: Bool = (try? Program.run(
        ["node", "-e", "require('amqplib')"], environment: ["NODE_PATH": clients.appendingPathComponent("node/node_modules").path],
        program: URL(fileURLWithPath: "/usr/bin/env"), killAfter: .seconds(30)
    ).status) == 0

    @Test("each producer publishes a job confirmed and mandatory, and reads its three results and the summary", arguments: [Language.python, .go, .ruby, .php])
    func producer(_ language: Language) async throws {
        try await Self.run(language)
    }

    @Test("the Node.js producer too", .enabled(if: nodeAmqplibInstalled, "amqplib is not installed: run npm ci in docs/clients/node (the npm registry is not reachable here)"))
    func nodeProducer() async throws {
        try await Self.run(.node)
    }

    @Test("each producer sends registry commands and a status query, and prints each answer; a refused command exits 1 with the error printed", arguments: [Language.python, .go, .ruby, .php])
    func registry(_ language: Language) async throws {
        try await Self.runRegistry(language)
    }

    @Test("the Node.js producer's registry commands too", .enabled(if: nodeAmqplibInstalled, "amqplib is not installed: run npm ci in docs/clients/node"))
    func nodeRegistry() async throws {
        try await Self.runRegistry(.node)
    }

    static func runRegistry(_ language: Language) async throws {
        let fixture = try await MockAPNsFixture.start { _ in }
        defer { Task { try? await fixture.server.shutdown() } }
        let prefix = TestBroker.uniqueName("client-registry-\(language)")
        let database = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix).db").path
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(prefix)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let (worker, command) = try await Self.start(
            language, prefix: prefix, fixture: fixture, queues: ", registry: \(prefix).registry", extra: "registry: {sqlite: \(database)}", scratch: scratch)
        func send(_ json: String) async throws -> (status: Int32, answer: [String: Any]?, errors: String) {
            let run = try await Program.running(
                command + ["--registry", json], environment: ["AMQP_URL": TestBroker.url, "PUSHWORKER_EXCHANGE": "\(prefix).push"],
                program: URL(fileURLWithPath: "/usr/bin/env"), killAfter: .seconds(120))
            let answer = try? JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any]
            return (run.status, answer, run.standardError)
        }
        let (old, new) = (Self.token(11), Self.token(12))
        for json in [
            #"{"command": "register_device", "app": "demo", "token": "\#(old)", "user": "u-1"}"#,
            #"{"command": "replace_token", "app": "demo", "old": "\#(old)", "new": "\#(new)"}"#,
        ] {
            let sent = try await send(json)
            #expect(sent.status == 0 && sent.answer?["ok"] as? Bool == true, "\(language): \(json): \(sent)")
        }
        let status = try await send(#"{"command": "status", "app": "demo", "token": "\#(new)"}"#)
        let device = status.answer?["status"] as? [String: Any]
        #expect(status.status == 0 && device?["registered"] as? Bool == true && device?["user"] as? String == "u-1", "\(language): \(status)")
        let refused = try await send(#"{"command": "replace_token", "app": "demo", "old": "\#(old)"}"#)
        #expect(refused.status == 1, "\(language): \(refused)")
        #expect((refused.answer?["error"] as? [String: Any])?["field"] as? String == "new", "\(language): \(refused)")
        #expect(refused.errors.contains("refused"), "\(language): \(refused.errors)")
        #expect(try await worker.stop() == 0, "\(worker.log)")
    }

    /// A worker on queues of its own (`prefix`), with `extra` configuration, and the command that
    /// runs `language`'s producer (built in `scratch` when it must be).
    static func start(
        _ language: Language, prefix: String, fixture: MockAPNsFixture, queues extraQueues: String = "", extra: String = "", scratch: URL
    ) async throws -> (worker: RunningProgram, command: [String]) {
        let config = try MockAPNsFixture.writeConfiguration("""
            amqp: {url: "\(TestBroker.url)"}
            queues: {exchange: \(prefix).push, jobs: \(prefix).jobs, dead_letter_exchange: \(prefix).dlx, dead_letters: \(prefix).dead, results: \(prefix).results\(extraQueues)}
            \(extra)
            apps:
            \(fixture.appYAML())
            """)
        let worker = try RunningProgram.worker(config: config)
        try await worker.waitForLog("worker started")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        return (worker, try await Self.command(language, scratch: scratch))
    }

    /// The command that runs `language`'s producer, built first when it must be. Fails naming the
    /// Debian package when the language's runtime or AMQP library is missing.
    static func command(_ language: Language, scratch: URL) async throws -> [String] {
        let file = clients.appendingPathComponent(language.rawValue)
        func require(_ check: [String], _ package: String) async throws {
            let result = try await Program.running(check, program: URL(fileURLWithPath: "/usr/bin/env"), killAfter: .seconds(60))
            guard result.status == 0 else {
                throw TestFailure("the \(language) producer cannot run: `\(check.joined(separator: " "))` failed (install the Debian package \(package); deploy/local/install-deps.sh does): \(result.standardError)")
            }
        }
        switch language {
        case .python:
            // Debian's interpreter, which has python3-pika, even when another python3 comes first on PATH.
            let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"
            try await require([python, "-c", "import pika"], "python3-pika")
            return [python, file.appendingPathComponent("producer.py").path]
        case .go:
            // Offline: amqp091-go from Debian's GOPATH, not from a module proxy.
            let binary = scratch.appendingPathComponent("producer").path
            try await require([
                "GO111MODULE=off", "GOPATH=/usr/share/gocode", "GOCACHE=\(scratch.appendingPathComponent("cache").path)",
                "go", "build", "-o", binary, file.appendingPathComponent("producer.go").path,
            ], "golang-go and golang-github-rabbitmq-amqp091-go-dev")
            return [binary]
        case .ruby:
            try await require(["ruby", "-e", "require 'bunny'"], "ruby-bunny")
            return ["ruby", file.appendingPathComponent("producer.rb").path]
        case .php:
            try await require(["php", "-r", "require '/usr/share/php/PhpAmqpLib/autoload.php';"], "php-cli and php-amqplib")
            return ["php", file.appendingPathComponent("producer.php").path]
        case .node:
            return ["NODE_PATH=\(file.appendingPathComponent("node_modules").path)", "node", file.appendingPathComponent("producer.js").path]
        }
    }

    static func run(_ language: Language) async throws {
        let dead = Self.token(3)
        let fixture = try await MockAPNsFixture.start { $0.unregisteredTokens = [dead: Date(timeIntervalSince1970: 1_700_000_000)] }
        let mock = fixture.server
        defer { Task { try? await mock.shutdown() } }
        let prefix = TestBroker.uniqueName("client-\(language)")
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(prefix)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let (worker, command) = try await Self.start(language, prefix: prefix, fixture: fixture, scratch: scratch)
        let tokens = [Self.token(1), Self.token(2), dead]
        // Two nodes, one of them down: each producer connects to the one that answers, whichever
        // it tries first.
        let closed = try ClosedPort()
        defer { closed.release() }
        let down = "amqp://guest:guest@127.0.0.1:\(closed.port)/"
        // Results one message per device, then packed (results: batched): the producer prints
        // each device's result on its own line either way. `failures` (only the dead token's)
        // shows the producer passes PUSHWORKER_RESULTS on; the worker tests show what it does.
        for mode in ["", "batched", "failures"] {
        let expectedTokens = mode == "failures" ? [dead] : tokens
        let run = try await Program.running(
            command + tokens, environment: ["AMQP_URL": "\(down),\(TestBroker.url)", "PUSHWORKER_EXCHANGE": "\(prefix).push", "PUSHWORKER_RESULTS": mode],
            program: URL(fileURLWithPath: "/usr/bin/env"), killAfter: .seconds(120))
        #expect(run.status == 0, "\(language) producer, results '\(mode)': \(run.standardError)\n\(worker.log)")

        // One JSON object per line: three results, then the summary.
        let lines = run.standardOutput.split(separator: "\n").map(String.init)
        let objects = try lines.map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
        }
        let results = objects.filter { $0["token"] != nil }
        let summary = try #require(objects.last, "no output:\n\(run.standardError)")
        #expect(results.count == expectedTokens.count, "\(lines)")
        #expect(Set(results.compactMap { $0["token"] as? String }) == Set(expectedTokens))
        #expect(Set(results.compactMap { $0["job_id"] as? String }).count == 1)
        for result in results {
            let expected = (result["token"] as? String) == dead ? "rejected" : "delivered"
            #expect(result["outcome"] as? String == expected, "\(result)")
        }
        #expect(results.first { ($0["token"] as? String) == dead }?["reason"] as? String == "Unregistered")
        #expect(summary["devices"] as? Int == 3)
        #expect(summary["job_id"] as? String == results.first?["job_id"] as? String)
        #expect((summary["outcomes"] as? [String: Int])?["delivered"] == 2)
        }
        var requests = 9
        if language == .python {
            // A job file as it is (examples/job.json, the README's): its own id, payload and options.
            let example = clients.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("examples/job.json")
            let run = try await Program.running(
                command + ["--job", example.path], environment: ["AMQP_URL": TestBroker.url, "PUSHWORKER_EXCHANGE": "\(prefix).push"],
                program: URL(fileURLWithPath: "/usr/bin/env"), killAfter: .seconds(120))
            #expect(run.status == 0, "python producer --job: \(run.standardError)\n\(worker.log)")
            let objects = run.standardOutput.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(objects.filter { $0["token"] != nil && $0["job_id"] as? String == "demo-1" }.count == 3, "\(run.standardOutput)")
            #expect(objects.last?["devices"] as? Int == 3 && objects.last?["job_id"] as? String == "demo-1", "\(run.standardOutput)")
            requests += 3
            // A Live Activity update (examples/live-activity-update.json, docs/jobs.md): the
            // producer sends the job as it is; the worker builds the aps.
            let update = example.deletingLastPathComponent().appendingPathComponent("live-activity-update.json")
            let live = try await Program.running(
                command + ["--job", update.path], environment: ["AMQP_URL": TestBroker.url, "PUSHWORKER_EXCHANGE": "\(prefix).push"],
                program: URL(fileURLWithPath: "/usr/bin/env"), killAfter: .seconds(120))
            #expect(live.status == 0, "python producer --job live-activity-update.json: \(live.standardError)\n\(worker.log)")
            let liveObjects = live.standardOutput.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(liveObjects.filter { $0["outcome"] as? String == "delivered" && $0["job_id"] as? String == "match-42-goal" }.count == 2, "\(live.standardOutput)")
            #expect(mock.recorded.filter { $0.pushType == "liveactivity" }.count == 2)
            requests += 2
        }
        #expect(mock.requestCount == requests)
        #expect(try await worker.stop() == 0, "\(worker.log)")
    }
}
