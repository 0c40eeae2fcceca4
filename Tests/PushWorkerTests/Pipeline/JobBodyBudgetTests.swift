import AMQP
import Foundation
import Logging
import PushWorker
import Synchronization
import TestSupport
import Testing

/// The now lane's bound on large bodies in work: large jobs take turns, one-device jobs never wait.
@Suite("JobBodyBudget: large bodies take turns in the now lane")
struct JobBodyBudgetTests {
    @Test("small bodies weigh nothing; a large one its size, at most the whole budget")
    func weights() {
        let budget = JobBodyBudget(limit: 200_000)
        #expect(budget.weight(ofBody: 600) == 0)
        #expect(budget.weight(ofBody: JobBodyBudget.largeBodyBytes) == 0)
        #expect(budget.weight(ofBody: 100_000) == 100_000)
        #expect(budget.weight(ofBody: 900_000) == 200_000, "a body over the budget goes alone, not never")
    }

    @Test("waiters are let in in arrival order, as many as fit, and a large one is not passed over by a smaller one")
    func order() async throws {
        let budget = JobBodyBudget(limit: 100)
        await budget.acquire(70)
        let admitted = Locked<[String]>([])
        let large = Task { await budget.acquire(60); admitted.withLock { $0.append("60") } }
        try await Self.until("the 60 waits") { budget.waiters == 1 }
        // 20 would fit beside the 70 held, but the 60 came first.
        let small = Task { await budget.acquire(20); admitted.withLock { $0.append("20") } }
        try await Self.until("the 20 waits behind it") { budget.waiters == 2 }
        #expect(admitted.value.isEmpty && budget.held == 70)
        budget.release(70)
        await large.value
        await small.value
        #expect(Set(admitted.value) == ["60", "20"] && budget.held == 80 && budget.waiters == 0)
        budget.release(60)
        budget.release(20)
        #expect(budget.held == 0)
    }

    @Test("in the pipeline: a second large job waits until the first is settled, a one-device job goes at once, and nothing is lost")
    func pipeline() async throws {
        TestLog.bootstrap()
        var settings = WorkerSettings()
        settings.chunkSize = 500
        let budget = JobBodyBudget(limit: 100_000)
        let publisher = GatedPublisher(queues: [JobPipelineTests.results], holding: JobPipelineTests.bulk)
        let sender = ScriptedSender([:])
        let pipeline = JobPipeline(
            settings: settings, lane: .now, apps: [JobPipeline.App(name: "demo", topic: "com.example.app", sender: sender)],
            publisher: publisher, bodyBudget: budget, logger: Logger(label: "test.budget"))
        #expect(budget.weight(ofBody: Self.large("first").count) > 0 && budget.weight(ofBody: Self.large("first").count) * 2 > budget.limit)
        let first = Task { await pipeline.run(JobDelivery(body: Self.large("first"), properties: AMQPProperties(messageID: "first"))) }
        try await Self.until("the first large job splits, its chunks held") { publisher.held > 0 }
        let second = Task { await pipeline.run(JobDelivery(body: Self.large("second"), properties: AMQPProperties(messageID: "second"))) }
        try await Self.until("the second large job waits for room") { budget.waiters == 1 }
        // A one-device job is settled while both large ones are in hand.
        let one = await pipeline.run(JobDelivery(body: Array(JobPipelineTests.job([5000]).utf8), properties: AMQPProperties(messageID: "one")))
        #expect(one == .acknowledge && sender.sent.map(\.deviceToken) == [JobPipelineTests.token(5000)])
        #expect(publisher.recorded.messages(to: JobPipelineTests.bulk).isEmpty, "the first job's chunks are held, the second has not been read")
        publisher.open()
        let settled = (await first.value, await second.value)
        #expect(settled.0 == .acknowledge && settled.1 == .acknowledge)
        // 1,100 devices in chunks of 500, for each job.
        let chunks = publisher.recorded.messages(to: JobPipelineTests.bulk)
        #expect(chunks.count == 6 && Set(chunks.compactMap { $0.properties.messageID }) == ["first#1", "first#2", "first#3", "second#1", "second#2", "second#3"])
        #expect(budget.held == 0 && budget.waiters == 0)
    }

    /// A job of 1,100 devices, about 75 KB: over `JobBodyBudget.largeBodyBytes`.
    static func large(_ id: String) -> [UInt8] {
        Array(JobPipelineTests.job(Array(1...1100)).replacingOccurrences(of: #""id": "j""#, with: #""id": "\#(id)""#).utf8)
    }

    /// Polls `condition`; fails after 30 s of it staying false (the steps it waits for are
    /// in-process and immediate, so that is no progress, not a slow machine).
    static func until(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestFailure("no progress within 30 s: \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// Records as `RecordingPublisher` does, but holds every publish to `holding` until `open()`.
final class GatedPublisher: MessagePublishing {
    let recorded: RecordingPublisher
    private let holding: String
    private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    init(queues: Set<String>, holding: String) {
        recorded = RecordingPublisher(queues: queues)
        self.holding = holding
    }

    var held: Int { state.withLock { $0.waiting.count } }

    func open() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    func publish(_ message: AMQPMessage) async throws {
        if message.routingKey == holding {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state in
                    if state.open { return true }
                    state.waiting.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
        try await recorded.publish(message)
    }

    func queueExists(_ queue: String) async throws -> Bool {
        try await recorded.queueExists(queue)
    }
}
