import AMQP
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// A worker running against a mock, with a big job of `count` tokens published and under way.
private struct JobUnderWay {
    let setup: WorkerProcessTests.Setup
    let worker: RunningProgram
    let publisher: AMQPPublisher
    let results: AMQPConsumer

    /// Starts a worker, publishes the job, and returns once the mock has accepted 300 of its devices.
    static func start(id: String, count: Int, faults: [MockAPNsFault], extra: String = "") async throws -> JobUnderWay {
        let setup = try await WorkerProcessTests.setUp(faults: faults, extra: "chunk_size: 500\n" + extra)
        let prefix = setup.prefix
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let topology = AMQPTopology(queues: [.durable("\(prefix).results")])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(prefix).results", prefetch: 1000, topology: topology)
        let tokens = (0..<count).map { "\"\(WorkerProcessTests.token($0))\"" }.joined(separator: ",")
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(#"{"id": "\#(id)", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}}"#.utf8)))
        let deadline = ContinuousClock.now + .seconds(30)
        while setup.mock.recorded.count < 300 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(setup.mock.recorded.count >= 300)
        return JobUnderWay(setup: setup, worker: worker, publisher: publisher, results: results)
    }

    func close() async {
        await results.close()
        await publisher.close()
        try? await setup.mock.shutdown()
    }
}

@Suite("Worker recovery: killed worker", .heavy, .usesBroker)
struct WorkerKillTests {
    @Test("a worker killed with SIGKILL in the middle of a 20,000-device job: a new worker completes it, every device gets a result")
    func sigkill() async throws {
        let job = try await JobUnderWay.start(id: "killed", count: 20_000, faults: [])
        _ = try await job.worker.stop(signal: SIGKILL)
        let second = try RunningProgram.worker(config: job.setup.config)
        try await second.waitForLog("worker started")
        let perDevice = try await collectResults(from: job.results, devices: 20_000, chunks: 40).perDevice
        #expect(perDevice.count == 20_000)
        // At least once, without a ledger: the figure to hold the ledger's test against.
        let pushedTwice = Dictionary(grouping: job.setup.mock.recorded, by: \.token).values.count { $0.count > 1 }
        print("SIGKILL mid 20,000-device job without a ledger: \(pushedTwice) devices pushed twice, \(perDevice.values.count { $0 > 1 }) published twice")
        #expect(try await second.stop() == 0, "\(second.log)")
        await job.close()
    }
}

extension WorkerKillTests {
    @Test("with the delivery ledger, a worker killed with SIGKILL mid-job: the new worker pushes again at most max_in_flight devices and publishes no result twice beyond them")
    func sigkillWithLedger() async throws {
        let ledger = FileManager.default.temporaryDirectory.appendingPathComponent("kill-ledger-\(UUID().uuidString.prefix(8)).db").path
        defer { try? FileManager.default.removeItem(atPath: ledger) }
        let job = try await JobUnderWay.start(id: "killed-ledger", count: 20_000, faults: [], extra: "ledger: {sqlite: \(ledger)}")
        _ = try await job.worker.stop(signal: SIGKILL)
        let second = try RunningProgram.worker(config: job.setup.config)
        try await second.waitForLog("worker started")
        let perDevice = try await collectResults(from: job.results, devices: 20_000, chunks: 40).perDevice
        #expect(perDevice.count == 20_000)
        let pushedTwice = Dictionary(grouping: job.setup.mock.recorded, by: \.token).values.count { $0.count > 1 }
        let publishedTwice = perDevice.values.count { $0 > 1 }
        #expect(pushedTwice <= AppConfiguration.defaultMaxInFlight, "\(pushedTwice) devices pushed twice")
        #expect(publishedTwice <= AppConfiguration.defaultMaxInFlight, "\(publishedTwice) devices with two results")
        #expect(second.log.contains("devices with a result in the ledger are not sent again"), "\(second.log)")
        print("SIGKILL mid 20,000-device job with the ledger: \(pushedTwice) devices pushed twice, \(publishedTwice) published twice")
        #expect(try await second.stop() == 0, "\(second.log)")
        await job.close()
    }
}

@Suite("Worker recovery: broker restart", .heavy, .restartsBroker)
struct WorkerBrokerRestartTests {
    @Test("the broker restarted during a job: the worker reconnects and the job completes with nothing lost")
    func brokerRestart() async throws {
        let job = try await JobUnderWay.start(id: "restart", count: 3000, faults: [MockAPNsFault(.latency(.milliseconds(20)))])
        try TestBroker.rabbitmqctl("stop_app")
        try await Task.sleep(for: .seconds(1))
        try TestBroker.rabbitmqctl("start_app")
        try TestBroker.rabbitmqctl("await_startup")
        // A broker restart and the reconnects after it pause the results for a while.
        let perDevice = try await collectResults(from: job.results, devices: 3000, chunks: 6, stall: .seconds(90)).perDevice
        #expect(perDevice.count == 3000)
        #expect(job.worker.process.isRunning, "\(job.worker.log)")
        #expect(try await job.worker.stop() == 0, "\(job.worker.log)")
        await job.close()
    }
}
