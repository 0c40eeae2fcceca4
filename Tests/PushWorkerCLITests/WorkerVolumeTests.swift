import AMQP
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// Jobs of tens of thousands of devices through worker processes: heavy, so one at a time.
@Suite("pushworker run, large jobs", .heavy, .usesBroker)
struct WorkerVolumeTests {
    @Test("two workers share a 20,000-device job through its chunks, with exactly one result per device")
    func chunksShared() async throws {
        // One APNs connection per worker, so the mock's connection numbers tell the workers apart.
        let setup = try await WorkerProcessTests.setUp(faults: [], extra: "chunk_size: 1000", appExtra: ["connections: 1"])
        defer { Task { try? await setup.mock.shutdown() } }
        let first = try RunningProgram.worker(config: setup.config)
        let second = try RunningProgram.worker(config: setup.config)
        try await first.waitForLog("worker started")
        try await second.waitForLog("worker started")
        let prefix = setup.prefix
        let topology = AMQPTopology(queues: [.durable("\(prefix).results")])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(prefix).results", prefetch: 1000, topology: topology)

        let count = 20_000
        let tokens = (0..<count).map { "\"\(WorkerProcessTests.token($0))\"" }.joined(separator: ",")
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(#"{"id": "big", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}}"#.utf8)))
        let (perDevice, chunks, jobs, resends) = try await collectResults(from: results, devices: count, chunks: 20)
        #expect(jobs == ["big"])
        #expect(chunks == Set((1...20).map { "\($0)/20" }))
        #expect(perDevice.count == count && perDevice.values.allSatisfy { $0 == 1 })
        #expect(Set(setup.mock.recorded.map(\.connection)).count == 2, "both workers should have sent some")
        // Once each, but for sends a worker made again after losing a connection (a PING
        // unanswered on a starved machine): its results count them as attempts, and the mock saw
        // those that reached it before the connection went.
        #expect(Set(setup.mock.recorded.map(\.token)).count == count && (count...count + resends).contains(setup.mock.recorded.count), "resent: \(resends)")
        #expect(try await first.stop() == 0)
        #expect(try await second.stop() == 0)
        await results.close()
        await publisher.close()
    }

    @Test("a job over 1 MiB is read as it arrives: a device named twice (in any case, in any chunk) is sent once; a large invalid job is dead-lettered with an error summary")
    func largeJobs() async throws {
        let setup = try await WorkerProcessTests.setUp(faults: [], extra: "chunk_size: 1000")
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let prefix = setup.prefix
        let topology = AMQPTopology(queues: [.durable("\(prefix).results"), .durable("\(prefix).dead", quorum: true)])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(prefix).results", prefetch: 1000, topology: topology)
        let dead = try await TestBroker.consumer(queue: "\(prefix).dead", topology: topology)

        // 15,000 devices, the first 3,000 named again at the end, upper-cased.
        let unique = 15_000
        let named = (0..<unique).map { WorkerProcessTests.token($0) } + (0..<3_000).map { WorkerProcessTests.token($0).uppercased() }
        let body = #"{"id": "dups", "audience": {"tokens": [\#(named.map { "\"\($0)\"" }.joined(separator: ","))]}, "payload": {"aps": {}}}"#
        #expect(body.utf8.count > 1 << 20)
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(body.utf8)))
        let (perDevice, chunks, _, resends) = try await collectResults(from: results, devices: unique, chunks: 15)
        #expect(chunks == Set((1...15).map { "\($0)/15" }))
        #expect(perDevice.count == unique && perDevice.values.allSatisfy { $0 == 1 })
        #expect((unique...unique + resends).contains(setup.mock.recorded.count), "resent: \(resends)")

        // The same below 1 MiB, where the job is read whole: 2,000 devices, 500 named twice.
        let small = (20_000..<22_000).map { WorkerProcessTests.token($0) } + (20_000..<20_500).map { WorkerProcessTests.token($0) }
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(
            #"{"id": "dups-small", "audience": {"tokens": [\#(small.map { "\"\($0)\"" }.joined(separator: ","))]}, "payload": {"aps": {}}}"#.utf8)))
        let (smallDevices, _, _, smallResends) = try await collectResults(from: results, devices: 2_000, chunks: 2)
        #expect(smallDevices.count == 2_000 && smallDevices.values.allSatisfy { $0 == 1 })
        let sentBefore = setup.mock.recorded.count
        #expect((unique + 2_000...unique + 2_000 + resends + smallResends).contains(sentBefore))

        // 20,000 tokens, one of them bad: nothing is sent, the original goes to the dead letters.
        var tokens = (0..<20_000).map { "\"\(WorkerProcessTests.token($0))\"" }
        tokens[17_777] = "\"not-a-token\""
        let invalid = Array(#"{"id": "bad-big", "audience": {"tokens": [\#(tokens.joined(separator: ","))]}, "payload": {"aps": {}}}"#.utf8)
        try await publisher.publish(.toQueue("\(prefix).jobs", body: invalid,
            properties: AMQPProperties(replyTo: "\(prefix).results", messageID: "bad-big")))
        let letter = try await dead.next(within: .seconds(30))
        #expect(letter.body == invalid)
        let death = letter.properties.headers?["x-death"]?.arrayValue?.first?.tableValue
        #expect(death?["reason"]?.stringValue == "rejected")
        try await letter.ack()
        let summary = try await results.next(within: .seconds(30))
        try await summary.ack()
        let error = try #require(try Reply(summary).summary?.error)
        #expect(error.code == .invalidToken)
        #expect(error.message.contains("audience.tokens[17777]"))
        #expect(setup.mock.recorded.count == sentBefore, "nothing of the invalid job was sent")
        #expect(try await worker.stop() == 0)
        await dead.close()
        await results.close()
        await publisher.close()
    }

    @Test("a worker's memory does not grow with the jobs it has taken: 4,000 more one-device jobs leave it where it was")
    func memoryFlatAcrossJobs() async throws {
        let setup = try await WorkerProcessTests.setUp(faults: [])
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let prefix = setup.prefix
        let topology = AMQPTopology(queues: [.durable("\(prefix).results")])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(prefix).results", prefetch: 1000, topology: topology)
        // Each job has one device and returns its summary only.
        func run(_ jobs: Range<Int>) async throws {
            for index in jobs {
                let job = #"{"id": "j\#(index)", "audience": {"tokens": ["\#(WorkerProcessTests.token(index))"]}, "payload": {"aps": {}}, "results": "none"}"#
                try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(job.utf8)))
            }
            for _ in jobs { try await results.next(within: .seconds(30)).ack() }
        }
        // Warm first: the allocator's pools, the connections, the caches.
        try await run(0..<500)
        let before = try Self.anonymousKiB(of: worker.process.processIdentifier)
        try await run(500..<4_500)
        let after = try Self.anonymousKiB(of: worker.process.processIdentifier)
        // A worker that kept each finished job's task grew by 52 MiB here (13 KiB a job, debug build);
        // without that, 36 KiB.
        #expect(after - before < 4 * 1024, "the worker's anonymous memory grew from \(before) KiB to \(after) KiB over 4,000 jobs")
        #expect(setup.mock.recorded.count == 4_500)
        #expect(try await worker.stop() == 0)
        await results.close()
        await publisher.close()
    }

    /// The process's private memory (RssAnon): the heap and stacks, not the mapped program.
    static func anonymousKiB(of pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
            let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1])
        else { throw TestFailure("no RssAnon in /proc/\(pid)/status") }
        return kib
    }
}
