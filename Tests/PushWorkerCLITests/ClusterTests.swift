import AMQP
import Foundation
import MockAPNs
import PushWorker
import SQLiteStores
import Stores
import TestSupport
import Testing

/// pushworker on a three-node RabbitMQ cluster (`deploy/local/rabbitmq.sh cluster`), with nodes
/// killed and restarted under it. Workers are given every node and prefer a known one
/// (`shuffle: false`), so the test knows which node to take away.
///
/// Delivery is at least once: a chunk job whose consumer's node dies before its ack is delivered
/// again, so its devices may be sent and reported twice. The tests count those repeats and hold
/// them to what was in flight: per connection lost, APNs sees at most prefetch × chunk size devices
/// again, and results come twice for those plus at most the results published and not yet
/// confirmed when the connection went (published again; at most 1024 per connection). No device
/// may go without a result.
@Suite("On a RabbitMQ cluster", .heavy, .serialized)
struct ClusterTests {
    static let chunk = 500
    static let prefetch = 4

    /// A worker preferring node `node`, its queues under a fresh prefix.
    static func setUp(preferring node: Int, faults: [MockAPNsFault] = [], extra: String = "") async throws -> WorkerProcessTests.Setup {
        try await TestCluster.ensureRunning()
        return try await WorkerProcessTests.setUp(
            faults: faults, extra: "chunk_size: \(chunk)\n" + extra,
            amqp: TestCluster.amqpYAML(preferring: node, prefetch: prefetch), prefix: TestBroker.uniqueName("cluster"), quorumQueues: true)
    }

    /// A job's way across the cluster: the worker prefers node 1, the producer node 2, and the
    /// results are read on node 3.
    struct Run {
        let setup: WorkerProcessTests.Setup
        let worker: RunningProgram
        let publisher: AMQPPublisher
        let results: AMQPConsumer

        static func start(faults: [MockAPNsFault] = [], extra: String = "") async throws -> Run {
            let setup = try await ClusterTests.setUp(preferring: 1, faults: faults, extra: extra)
            let worker = try RunningProgram.worker(config: setup.config)
            try await worker.waitForLog("worker started")
            return Run(
                setup: setup, worker: worker, publisher: try await TestCluster.publisher(preferring: 2),
                results: try await TestCluster.consumer(queue: "\(setup.prefix).results", preferring: 3))
        }

        func publish(_ id: String, devices: Int, results mode: String? = nil) async throws {
            try await publisher.publish(.toQueue("\(setup.prefix).jobs", body: ClusterTests.job(id, devices: devices, results: mode)))
        }

        /// Every device's result and every chunk's summary; the worker's log joins a failure.
        func collect(devices: Int, stall: Duration) async throws -> [String: Int] {
            do {
                return try await collectResults(from: results, devices: devices, chunks: devices / ClusterTests.chunk, stall: stall).perDevice
            } catch {
                Issue.record("\(error); the worker's log:\n\(worker.log)")
                throw error
            }
        }

        /// The worker still runs, stops on SIGTERM with 0; everything closed.
        func finish() async throws {
            #expect(worker.process.isRunning, "\(worker.log)")
            #expect(try await worker.stop() == 0, "\(worker.log)")
            await results.close()
            await publisher.close()
            try? await setup.mock.shutdown()
        }
    }

    static func job(_ id: String, devices: Int, results mode: String? = nil) -> [UInt8] {
        let tokens = (0..<devices).map { "\"\(WorkerProcessTests.token($0))\"" }.joined(separator: ",")
        let field = mode.map { #""results": "\#($0)", "# } ?? ""
        return Array(#"{"id": "\#(id)", \#(field)"audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}}"#.utf8)
    }

    /// Unconfirmed publishes a connection holds at most (AMQPConfiguration's default).
    static let unconfirmed = 1024

    /// Every device has a result; returns how many came more than once.
    static func repeats(_ perDevice: [String: Int], devices: Int) -> Int {
        #expect(perDevice.count == devices, "devices without a result: \(devices - perDevice.count)")
        return perDevice.values.reduce(0) { $0 + $1 - 1 }
    }

    static func waitForRequests(_ mock: MockAPNsServer, atLeast count: Int) async throws {
        var last = -1, lastChange = ContinuousClock.now
        while mock.requestCount < count {
            if mock.requestCount != last { (last, lastChange) = (mock.requestCount, .now) }
            guard ContinuousClock.now - lastChange < .seconds(60) else { throw TestFailure("APNs requests stalled at \(last) of \(count)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A 50,000-device job under way when node 1, the one the worker consumes from, is killed:
    /// when it was killed, how many devices APNs saw again, how many results came twice.
    static func killConsumerNode(_ run: Run, id: String) async throws -> (killedAt: Int, sentAgain: Int, repeats: Int) {
        let devices = 50_000
        try await run.publish(id, devices: devices)
        try await waitForRequests(run.setup.mock, atLeast: 10_000)
        try await TestCluster.kill(1)
        let killedAt = run.setup.mock.requestCount
        let repeats = repeats(try await run.collect(devices: devices, stall: .seconds(120)), devices: devices)
        return (killedAt, run.setup.mock.requestCount - devices, repeats)
    }

    @Test("SIGKILL of the node a worker consumes from, mid 50,000-device job published on another node: every device gets its result, repeats stay within what was in flight, the worker goes on via another node")
    func consumerNodeKilled() async throws {
        let run = try await Run.start()
        let (killedAt, sentAgain, repeats) = try await Self.killConsumerNode(run, id: "big")
        print("cluster: node 1 killed after \(killedAt) of 50000 requests; APNs saw \(sentAgain) device(s) again (in flight at most \(Self.prefetch * Self.chunk)); \(repeats) result(s) repeated")
        #expect(sentAgain <= Self.prefetch * Self.chunk)
        #expect(repeats <= sentAgain + Self.unconfirmed)
        #expect(run.worker.log.contains("failed over to another node"), "\(run.worker.log)")
        try await run.finish()
        try await TestCluster.start(1)
    }

    @Test("with the delivery ledger, SIGKILL of the node a worker consumes from mid 50,000-device job: APNs sees at most max_in_flight devices again, every device gets its result")
    func consumerNodeKilledWithLedger() async throws {
        let ledger = FileManager.default.temporaryDirectory.appendingPathComponent("cluster-ledger-\(UUID().uuidString.prefix(8)).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: ledger + suffix) } }
        let run = try await Run.start(extra: "ledger: {sqlite: \(ledger)}")
        let (killedAt, sentAgain, repeats) = try await Self.killConsumerNode(run, id: "big-ledger")
        print("cluster with the ledger: node 1 killed after \(killedAt) of 50000 requests; APNs saw \(sentAgain) device(s) again (max_in_flight \(AppConfiguration.defaultMaxInFlight)); \(repeats) result(s) repeated")
        #expect(sentAgain <= AppConfiguration.defaultMaxInFlight)
        #expect(repeats <= sentAgain + Self.unconfirmed)
        try await run.finish()
        try await TestCluster.start(1)
    }

    @Test("with the delivery ledger and results batched, SIGKILL of the node a worker consumes from mid 50,000-device job: APNs sees at most max_in_flight devices again, every device gets its result (some from the ledger)")
    func consumerNodeKilledWithLedgerBatched() async throws {
        let ledger = FileManager.default.temporaryDirectory.appendingPathComponent("cluster-batched-\(UUID().uuidString.prefix(8)).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: ledger + suffix) } }
        let run = try await Run.start(extra: "ledger: {sqlite: \(ledger)}")
        let devices = 50_000
        try await run.publish("big-batched", devices: devices, results: "batched")
        try await Self.waitForRequests(run.setup.mock, atLeast: 10_000)
        try await TestCluster.kill(1)
        let killedAt = run.setup.mock.requestCount
        let replies: Replies
        do {
            replies = try await collectReplies(from: run.results, chunks: devices / Self.chunk, stall: .seconds(120))
        } catch {
            Issue.record("\(error); the worker's log:\n\(run.worker.log)")
            throw error
        }
        let sentAgain = run.setup.mock.requestCount - devices
        print("cluster with the ledger, results batched: node 1 killed after \(killedAt) of 50000 requests; APNs saw \(sentAgain) device(s) again; "
              + "\(replies.perDevice.values.count { $0 > 1 }) result(s) twice, \(replies.fromLedger) answered from the ledger")
        #expect(sentAgain <= AppConfiguration.defaultMaxInFlight)
        #expect(replies.perDevice.count == devices, "devices without a result: \(devices - replies.perDevice.count)")
        #expect(replies.single == 0)
        #expect(replies.lastSummaries.values.allSatisfy { $0.outcomes.values.reduce(0, +) == Self.chunk })
        try await run.finish()
        try await TestCluster.start(1)
    }

    @Test("a rolling restart of all three nodes during a job: nothing lost")
    func rollingRestart() async throws {
        let run = try await Run.start(faults: [MockAPNsFault(.latency(.milliseconds(5)))])
        let devices = 20_000
        try await run.publish("rolling", devices: devices)
        try await Self.waitForRequests(run.setup.mock, atLeast: 2_000)
        // Results are read meanwhile: the restarts must not wait on a full queue.
        let collecting = Task { try await run.collect(devices: devices, stall: .seconds(180)) }
        var restartedAt: [Int] = []
        for node in 1...3 {
            try await TestCluster.restart(node)
            restartedAt.append(run.setup.mock.requestCount)
        }
        let repeats = Self.repeats(try await collecting.value, devices: devices)
        let sentAgain = run.setup.mock.requestCount - devices
        let failovers = run.worker.log.components(separatedBy: "failed over to another node").count - 1
        print("cluster: rolling restart, nodes back after \(restartedAt) requests; \(failovers) fail-overs logged; APNs saw \(sentAgain) device(s) again (at most \(3 * Self.prefetch * Self.chunk) over 3 restarts); \(repeats) result(s) repeated")
        // Each restart takes the node under the worker's connections (1, then 2, then 3).
        #expect(failovers >= 3, "\(run.worker.log)")
        #expect(sentAgain <= 3 * Self.prefetch * Self.chunk)
        #expect(repeats <= sentAgain + 3 * Self.unconfirmed)
        try await run.finish()
    }

    @Test("started while two of the three nodes are down, a worker and a client that waits for the broker wait until a majority can form their new quorum queues, then start; a job gets its results")
    func startsOnceAMajorityIsBack() async throws {
        let setup = try await Self.setUp(preferring: 1)
        defer { Task { try? await setup.mock.shutdown() } }
        try await TestCluster.kill(2)
        try await TestCluster.kill(3)
        // Node 1 answers, but cannot elect a new quorum queue's leader with one node of three. It
        // says so after 15 s (`cluster_not_formed`), having removed the half-made queue. The
        // client and the worker, though their requests time out after 10 s, wait for that answer
        // to a quorum queue's declaration (a declaration given up on and made again would be told
        // declare-ok for a queue about to go). Both must hear it and wait, not fail.
        var configuration = try TestCluster.configuration(
            preferring: 1, topology: AMQPTopology(queues: [.durable("\(setup.prefix).client", quorum: true, extraArguments: TestBroker.expiry)]))
        configuration.addresses = [configuration.addresses[0]]
        #expect(configuration.rpcTimeout == .seconds(10))
        configuration.waitsForBroker = true
        let failures = Locked<[AMQPError]>([])
        configuration.onConnectionEvent = { event in
            if case .attemptFailed(let error) = event { failures.withLock { $0.append(error) } }
        }
        let client = Task { [configuration] in try await AMQPPublisher.connect(configuration) }
        // Should the test end early, the client, still waiting, is closed once it connects.
        defer { Task { try? await client.value.close() } }
        let worker = try RunningProgram.worker(config: setup.config)
        // A node slow to answer at all (a loaded machine) may first time out.
        let deadline = ContinuousClock.now + .seconds(180)
        while !failures.value.contains(where: \.isClusterNotFormed) {
            guard ContinuousClock.now < deadline else { throw TestFailure("the client never heard cluster_not_formed: \(failures.value)") }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(failures.value.allSatisfy { $0.isClusterNotFormed || $0.kind == .timeout }, "\(failures.value)")
        try await worker.waitForLog("the broker cannot form a quorum queue's cluster yet; retrying", within: .seconds(180))
        #expect(worker.log.contains("cluster_not_formed"), "\(worker.log)")
        #expect(!worker.log.contains("worker started"))

        try await TestCluster.start(2)
        let publisher = try await withTimeout(.seconds(180), "the client's start once node 2 is back") { try await client.value }
        try await publisher.publish(.toQueue("\(setup.prefix).client", body: [1]))
        try await worker.waitForLog("worker started", within: .seconds(180))
        let producer = try await TestCluster.publisher(preferring: 1)
        let results = try await TestCluster.consumer(queue: "\(setup.prefix).results", preferring: 1)
        let devices = 10
        try await producer.publish(.toQueue("\(setup.prefix).jobs", body: Self.job("after-majority", devices: devices)))
        let collected = try await collectResults(from: results, devices: devices, chunks: 1, stall: .seconds(60))
        #expect(Self.repeats(collected.perDevice, devices: devices) == 0)
        #expect(worker.process.isRunning, "\(worker.log)")
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await results.close()
        await producer.close()
        try await TestCluster.ensureRunning()
    }

    @Test("queues migrate while two of the three nodes are down: it declares the holding quorum queue again until a majority is back, then moves every message, once")
    func migrateWaitsForAMajority() async throws {
        let setup = try await Self.setUp(preferring: 1)
        defer { Task { try? await setup.mock.shutdown() } }
        // A classic results queue on node 1, as pushworker 0.4 declared it, with messages.
        let results = "\(setup.prefix).results"
        let publisher = try await TestCluster.publisher(preferring: 1, topology: AMQPTopology(queues: [.durable(results)]))
        let count = 300
        try await publisher.publish(contentsOf: (0..<count).map {
            .toQueue(results, body: Array("result \($0)".utf8), properties: AMQPProperties(persistent: true, messageID: "r\($0)"))
        })
        await publisher.close()
        try await TestCluster.kill(2)
        try await TestCluster.kill(3)
        // Node 1 answers, and refuses the configured results queue (classic against quorum) at
        // once; the holding queue, a new quorum queue, it cannot form with one node of three.
        let migrate = try RunningProgram(Program.executable, arguments: ["queues", "migrate", "--config", setup.config.path])
        try await migrate.waitForLog("the broker cannot form a quorum queue's cluster yet; declaring it again", within: .seconds(180))
        #expect(migrate.log.contains("\(results).migrating"), "\(migrate.log)")
        try await TestCluster.start(2)
        let report = "\(count) message(s) moved out and \(count) back"
        // Migrate declares for two minutes. A machine busy enough to take longer to start node 2
        // sees it give up, saying what an operator does then: that second run must finish it.
        do {
            try await migrate.waitForLog(report, within: .seconds(180))
            let deadline = ContinuousClock.now + .seconds(60)
            while migrate.process.isRunning {
                guard ContinuousClock.now < deadline else { throw TestFailure("migrate did not exit after its report:\n\(migrate.log)") }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(migrate.process.terminationStatus == 0, "\(migrate.log)")
        } catch where !migrate.process.isRunning && migrate.log.contains("Nothing is lost: nothing has moved yet; run migrate again") {
            let again = try await Program.running(["queues", "migrate", "--config", setup.config.path])
            #expect(again.status == 0, "\(again.standardError)")
            #expect(again.standardOutput.contains(report), "\(again.standardOutput)\(again.standardError)")
        }

        // Quorum now, each message there once and in order.
        let inspector = try await TestCluster.publisher(preferring: 1)
        #expect(try await inspector.perform(.inspect("\(results).migrating")) == nil)
        try await inspector.perform(.declare(.durable(results, quorum: true)))
        let consumer = try await TestCluster.consumer(queue: results, preferring: 1, prefetch: 500)
        for index in 0..<count {
            let delivery = try await consumer.next(within: .seconds(30))
            #expect(delivery.properties.messageID == "r\(index)")
            try await delivery.ack()
        }
        #expect(try await inspector.perform(.inspect(results))?.messages == 0)
        await consumer.close()
        await inspector.close()
        try await TestCluster.ensureRunning()
    }

    @Test("two workers on different nodes share one broadcast: each takes chunks, every device exactly one result")
    func twoWorkersOneBroadcast() async throws {
        let setup = try await Self.setUp(preferring: 1, faults: [MockAPNsFault(.latency(.milliseconds(5)))])
        defer { Task { try? await setup.mock.shutdown() } }
        // The second worker: the same file, preferring node 2.
        let first = try String(contentsOf: setup.config, encoding: .utf8)
        let second = setup.config.deletingLastPathComponent().appendingPathComponent("\(setup.prefix)-2.yaml")
        try Data(first.replacingOccurrences(of: TestCluster.amqpYAML(preferring: 1, prefetch: Self.prefetch), with: TestCluster.amqpYAML(preferring: 2, prefetch: Self.prefetch)).utf8).write(to: second)
        #expect(try String(contentsOf: second, encoding: .utf8).contains(TestCluster.urls(preferring: 2)[0] + "\", "))
        let workers = [
            try RunningProgram.worker(config: setup.config, arguments: ["--log-format", "json"]),
            try RunningProgram.worker(config: second, arguments: ["--log-format", "json"]),
        ]
        for worker in workers { try await worker.waitForLog("worker started") }
        let publisher = try await TestCluster.publisher(preferring: 3)
        let results = try await TestCluster.consumer(queue: "\(setup.prefix).results", preferring: 3)

        let devices = 20_000
        try await publisher.publish(.toQueue("\(setup.prefix).jobs", body: Self.job("shared", devices: devices)))
        let collected = try await collectResults(from: results, devices: devices, chunks: devices / Self.chunk, stall: .seconds(60))
        #expect(Self.repeats(collected.perDevice, devices: devices) == 0)
        #expect(setup.mock.requestCount == devices)
        let done = workers.map { $0.log.components(separatedBy: "\"message\":\"job done\"").count - 1 }
        print("cluster: chunk jobs done per worker \(done)")
        #expect(done.allSatisfy { $0 > 0 }, "each worker took a share: \(done)")
        for worker in workers { #expect(try await worker.stop() == 0, "\(worker.log)") }
        await results.close()
        await publisher.close()
    }

    @Test("registry commands published while the worker's node dies: each applied, each answered")
    func registryCommandsThroughNodeLoss() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db").path
        let setup = try await Self.setUp(preferring: 1, extra: "registry: {sqlite: \(file)}")
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let replies = "\(setup.prefix).replies"
        let topology = AMQPTopology(queues: [.durable(replies, quorum: true, extraArguments: TestBroker.expiry)])
        let publisher = try await TestCluster.publisher(preferring: 2, topology: topology)
        let answers = try await TestCluster.consumer(queue: replies, preferring: 3, topology: topology)

        let commands = 600
        let publishing = Task {
            for index in 0..<commands {
                let body = #"{"command": "register_device", "app": "demo", "token": "\#(WorkerProcessTests.token(index))", "user": "u-\#(index % 50)"}"#
                // A publish cut off by the node's death is published again, as a producer would.
                while true {
                    do {
                        try await publisher.publish(.toQueue("\(setup.prefix).registry", body: Array(body.utf8), properties: AMQPProperties(persistent: true, replyTo: replies, messageID: "c\(index)")))
                        break
                    } catch let error as AMQPError where error.isRetryable {
                        try await Task.sleep(for: .milliseconds(100))
                    }
                }
                if index % 50 == 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
        }
        var answered: [String: Int] = [:]
        var killed = false
        while answered.count < commands {
            let delivery = try await answers.next(within: .seconds(120))
            try? await delivery.ack()
            #expect(String(decoding: delivery.body, as: UTF8.self).contains(#""ok":true"#), "\(String(decoding: delivery.body, as: UTF8.self))")
            answered[delivery.properties.correlationID ?? "?", default: 0] += 1
            if !killed && answered.count >= commands / 4 {
                try await TestCluster.kill(1)
                killed = true
            }
        }
        try await publishing.value
        #expect(Set(answered.keys) == Set((0..<commands).map { "c\($0)" }))
        let store = try SQLiteRegistryStore(path: file)
        var registered = 0
        for index in 0..<commands where try await store.device(app: "demo", token: WorkerProcessTests.token(index))?.user == "u-\(index % 50)" {
            registered += 1
        }
        #expect(registered == commands)
        print("cluster: \(commands) registry commands, node 1 killed after \(commands / 4) answers; answered twice: \(answered.values.filter { $0 > 1 }.count)")
        #expect(worker.process.isRunning, "\(worker.log)")
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await answers.close()
        await publisher.close()
        try await TestCluster.start(1)
    }

    @Test("a delayed retry round (429, then 200) whose retry queue's leader is killed while it waits: every device delivered, on its second attempt")
    func retryQueueLeaderKilled() async throws {
        let devices = 200
        let tokens = Set((0..<devices).map { WorkerProcessTests.token($0) })
        // Each device's first request answered 429 (a fault per token: `times` counts per fault).
        let run = try await Run.start(
            faults: tokens.map { MockAPNsFault(.reject(.tooManyRequests), tokens: [$0], times: 1) },
            extra: "retry_in_process_attempts: 1\nretry_delays_ms: [8000]")
        // The node leading the retry queue (the worker declared it, on its node, so the worker's
        // connections are likely lost with it too).
        let retryQueue = "\(run.setup.prefix).jobs.retry.8000ms"
        let leader = try #require(try await TestCluster.leader(of: retryQueue))

        try await run.publish("retried", devices: devices)
        // Every device answered 429 and handed on to the retry queue (one retry job: the job is
        // one chunk), waiting there for 8 s.
        try await Self.waitForRequests(run.setup.mock, atLeast: devices)
        try await withTimeout(.seconds(60), "the retry job reaching its queue") {
            while (try await run.publisher.perform(.inspect(retryQueue))?.messages ?? 0) == 0 { try await Task.sleep(for: .milliseconds(50)) }
        }
        try await TestCluster.kill(leader)

        var outcomes: [String: [PushResult]] = [:]
        var summaries = 0
        while outcomes.count < devices || summaries == 0 {
            let delivery = try await run.results.next(within: .seconds(120))
            try? await delivery.ack()
            switch try Reply(delivery) {
            case .result(let result): outcomes[result.token, default: []].append(result)
            case .summary: summaries += 1
            }
        }
        var seen: [String: Int] = [:]
        for results in outcomes.values { for result in results { seen["\(result.outcome.rawValue)/\(result.attempts)", default: 0] += 1 } }
        let repeated = outcomes.values.reduce(0) { $0 + $1.count - 1 }
        print("cluster: retry queue leader node \(leader) killed while \(devices) devices waited; results by outcome/attempts: \(seen); \(repeated) repeated")
        #expect(outcomes.values.allSatisfy { results in results.allSatisfy { $0.outcome == .delivered && $0.attempts == 2 } }, "\(seen)")
        #expect(repeated <= Self.unconfirmed)
        try await run.finish()
        try await TestCluster.start(leader)
    }
}
