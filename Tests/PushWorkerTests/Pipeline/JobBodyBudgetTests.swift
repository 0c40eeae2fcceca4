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

    @Test("a large waiter is not passed over by a smaller one that would fit; a release lets in every waiter that fits")
    func order() async throws {
        let budget = JobBodyBudget(limit: 100)
        #expect(await budget.acquire(70))
        let admitted = Locked<[String: Bool]>([:])
        _ = Task { let got = await budget.acquire(60); admitted.withLock { $0["60"] = got } }
        try await Self.until("the 60 waits") { budget.waiters == 1 }
        // 20 would fit beside the 70 held, but the 60 came first.
        _ = Task { let got = await budget.acquire(20); admitted.withLock { $0["20"] = got } }
        try await Self.until("the 20 waits behind it") { budget.waiters == 2 }
        #expect(admitted.value.isEmpty && budget.held == 70)
        budget.release(70)
        try await Self.until("both let in by one release") { admitted.value.count == 2 }
        #expect(admitted.value == ["60": true, "20": true] && budget.held == 80 && budget.waiters == 0)
        budget.release(60)
        budget.release(20)
        #expect(budget.held == 0)
    }

    @Test("closed as the worker stops: every wait ends with false, holding nothing, and so do those that come later")
    func close() async throws {
        let budget = JobBodyBudget(limit: 100)
        #expect(await budget.acquire(100))
        let answered = Locked<[Bool]>([])
        _ = Task { let got = await budget.acquire(50); answered.withLock { $0.append(got) } }
        try await Self.until("the 50 waits") { budget.waiters == 1 }
        budget.close()
        try await Self.until("the wait ends") { answered.value.count == 1 }
        #expect(answered.value == [false])
        #expect(try await withTimeout(.seconds(30), "an acquire after the close") { await budget.acquire(10) } == false)
        #expect(budget.held == 100 && budget.waiters == 0)
        budget.release(100)
        #expect(budget.held == 0)
    }

    @Test("in the pipeline: a second large job waits until the first is settled, a one-device job goes at once, and nothing is lost")
    func pipeline() async throws {
        let budget = JobBodyBudget(limit: 100_000)
        let publisher = GatedPublisher(queues: [JobPipelineTests.results], holding: JobPipelineTests.bulk)
        let sender = ScriptedSender([:])
        let pipeline = Self.pipeline(budget: budget, publisher: publisher, sender: sender)
        #expect(budget.weight(ofBody: Self.large("first").count) > 0 && budget.weight(ofBody: Self.large("first").count) * 2 > budget.limit)
        let first = Task { await pipeline.run(JobDelivery(body: Self.large("first"), properties: AMQPProperties(messageID: "first"))) }
        try await Self.until("the first large job splits, its chunks held") { publisher.held > 0 }
        let second = Task { await pipeline.run(JobDelivery(body: Self.large("second"), properties: AMQPProperties(messageID: "second"))) }
        try await Self.until("the second large job waits for room") { budget.waiters == 1 }
        // A one-device job is settled while both large ones are in hand.
        let settledOne = Locked<JobSettlement?>(nil)
        _ = Task {
            let settlement = await pipeline.run(JobDelivery(body: Array(JobPipelineTests.job([5000]).utf8), properties: AMQPProperties(messageID: "one")))
            settledOne.withLock { $0 = settlement }
        }
        try await Self.until("the one-device job is settled beside them") { settledOne.value != nil }
        #expect(settledOne.value == .acknowledge && sender.sent.map(\.deviceToken) == [JobPipelineTests.token(5000)])
        #expect(publisher.recorded.messages(to: JobPipelineTests.bulk).isEmpty, "the first job's chunks are held, the second has not been read")
        publisher.open()
        let settled = try await withTimeout(.seconds(30), "both large jobs settled once their chunks go") { (await first.value, await second.value) }
        #expect(settled.0 == .acknowledge && settled.1 == .acknowledge)
        // 1,100 devices in chunks of 500, for each job.
        let chunks = publisher.recorded.messages(to: JobPipelineTests.bulk)
        #expect(chunks.count == 6 && Set(chunks.compactMap { $0.properties.messageID }) == ["first#1", "first#2", "first#3", "second#1", "second#2", "second#3"])
        #expect(budget.held == 0 && budget.waiters == 0)

        // A large body refused (no payload) gives its bytes back too.
        let refused = Array(#"{"id": "bad", "audience": {"tokens": [\#((1...1100).map { "\"\(JobPipelineTests.token($0))\"" }.joined(separator: ","))]}}"#.utf8)
        #expect(budget.weight(ofBody: refused.count) > 0)
        #expect(await pipeline.run(JobDelivery(body: refused, properties: AMQPProperties(messageID: "bad"))) == .acknowledge)
        #expect(publisher.recorded.messages.contains { $0.properties.headers?["x-pushworker-error-field"]?.stringValue == "payload" })
        #expect(budget.held == 0)
    }

    @Test("a streamed body (over 1 MiB) takes its turn, weighing at most a quarter of the budget")
    func streamed() async throws {
        let budget = JobBodyBudget(limit: 4 << 20)
        let streamed = { (size: Int) in JobDelivery(body: [], streamed: StreamedJobReader(bodySize: size), properties: AMQPProperties(messageID: "big")) }
        #expect(budget.weight(of: streamed(10 << 20)) == 1 << 20 && budget.weight(of: streamed(1 << 16)) == 0)
        let pipeline = Self.pipeline(budget: budget, publisher: RecordingPublisher(queues: [JobPipelineTests.results]))
        #expect(await budget.acquire(4 << 20))
        let waiting = Task { await pipeline.run(streamed(10 << 20)) }
        try await Self.until("the streamed job waits for room") { budget.waiters == 1 }
        budget.close()
        #expect(try await withTimeout(.seconds(30), "the streamed job given back on close") { await waiting.value } == .requeue)
        budget.release(4 << 20)
        #expect(budget.held == 0)
    }

    @Test("a large job still waiting when the worker stops, or whose connection went meanwhile, goes back to the queue undecoded; a chunk job never waits")
    func stopped() async throws {
        let budget = JobBodyBudget(limit: 100_000)
        let publisher = GatedPublisher(queues: [JobPipelineTests.results], holding: JobPipelineTests.bulk)
        let pipeline = Self.pipeline(budget: budget, publisher: publisher)
        let first = Task { await pipeline.run(JobDelivery(body: Self.large("first"), properties: AMQPProperties(messageID: "first"))) }
        try await Self.until("the first large job splits, its chunks held") { publisher.held > 0 }
        let current = Locked(true)
        let waiting = Task {
            await pipeline.run(JobDelivery(body: Self.large("second"), properties: AMQPProperties(messageID: "second"), isCurrent: { current.value }))
        }
        try await Self.until("the second waits") { budget.waiters == 1 }
        // A chunk job's body is not weighed: it goes (on to the bulk lane) while both are in hand.
        var chunk = AMQPProperties(messageID: "part")
        chunk.headers = [WireHeader.chunk: .string("local")]
        let handedOn = Task { await pipeline.run(JobDelivery(body: Self.large("part"), properties: chunk)) }
        try await Self.until("the chunk job is handed to the bulk lane") { publisher.heldIDs.contains("part") }
        #expect(budget.waiters == 1)
        budget.close()
        #expect(try await withTimeout(.seconds(30), "the waiting job given back on close") { await waiting.value } == .requeue)
        publisher.open()
        let settled = try await withTimeout(.seconds(30), "the first job and the chunk settled") { (await first.value, await handedOn.value) }
        #expect(settled.0 == .acknowledge && settled.1 == .acknowledge)
        #expect(!publisher.recorded.messages.contains { $0.properties.messageID?.hasPrefix("second") == true }, "the waiting job was never decoded")
        #expect(budget.held == 0)

        // A job whose connection went while it waited goes back too.
        let reopened = JobBodyBudget(limit: 100_000)
        let again = Self.pipeline(budget: reopened, publisher: publisher)
        #expect(await reopened.acquire(100_000))
        let stale = Task {
            await again.run(JobDelivery(body: Self.large("third"), properties: AMQPProperties(messageID: "third"), isCurrent: { current.value }))
        }
        try await Self.until("the third waits") { reopened.waiters == 1 }
        current.withLock { $0 = false }
        reopened.release(100_000)
        #expect(try await withTimeout(.seconds(30), "the stale job given back") { await stale.value } == .requeue && reopened.held == 0)
        #expect(!publisher.recorded.messages.contains { $0.properties.messageID?.hasPrefix("third") == true })
    }

    /// The now lane's pipeline over `budget`, with chunks of 500 devices.
    static func pipeline(budget: JobBodyBudget, publisher: any MessagePublishing, sender: ScriptedSender = ScriptedSender([:])) -> JobPipeline {
        TestLog.bootstrap()
        var settings = WorkerSettings()
        settings.chunkSize = 500
        return JobPipeline(
            settings: settings, lane: .now, apps: [JobPipeline.App(name: "demo", topic: "com.example.app", sender: sender)],
            publisher: publisher, bodyBudget: budget, logger: Logger(label: "test.budget"))
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
    private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>], ids: [String])>((false, [], []))

    init(queues: Set<String>, holding: String) {
        recorded = RecordingPublisher(queues: queues)
        self.holding = holding
    }

    var held: Int { state.withLock { $0.waiting.count } }
    /// The message ids of the publishes held now.
    var heldIDs: [String] { state.withLock { $0.ids } }

    func open() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = []; state.ids = [] }
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
                    state.ids.append(message.properties.messageID ?? "")
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
