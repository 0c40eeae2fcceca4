import Foundation
import Logging
import PushWorker
import Registry
import Synchronization
import Testing

/// The writer with two batches in flight (as on PostgreSQL): a later batch that commits first
/// must not give its devices' slots back, nor end a job's `sync`, before the batch before it.
@Suite("The ledger writer")
struct LedgerWriterTests {
    /// The real SQLite ledger, with the first write held until the test opens it and a report
    /// of each write's start and end: the timing of a slow server, around a real store.
    final class HeldFirstWrite: DeliveryLedger {
        let store: SQLiteDeliveryLedger
        let events: AsyncStream<String>
        private let sink: AsyncStream<String>.Continuation
        private let state = Mutex<(writes: Int, gate: CheckedContinuation<Void, Never>?, open: Bool)>((0, nil, false))

        init() throws {
            store = try SQLiteDeliveryLedger(path: FileManager.default.temporaryDirectory.appendingPathComponent("writer-\(UUID().uuidString.prefix(8)).db").path)
            (events, sink) = AsyncStream<String>.makeStream()
        }

        var concurrentWrites: Int { 2 }

        func open() {
            let gate = state.withLock { state in
                state.open = true
                defer { state.gate = nil }
                return state.gate
            }
            gate?.resume()
        }

        func write(_ records: [DeliveryRecord]) async throws(RegistryError) {
            let number = state.withLock { state in
                state.writes += 1
                return state.writes
            }
            sink.yield("start \(number)")
            if number == 1 {
                await withCheckedContinuation { continuation in
                    let now = state.withLock { state in
                        if state.open { return true }
                        state.gate = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            }
            try await store.write(records)
            sink.yield("end \(number)")
        }

        func finals(job: String, app: String, tokens: [String]) async throws(RegistryError) -> [String: DeliveryRecord] {
            try await store.finals(job: job, app: app, tokens: tokens)
        }

        func deliveries(_ query: DeliveryQuery) async throws(RegistryError) -> [DeliveryRecord] { try await store.deliveries(query) }

        func expire(before: Int64) async throws(RegistryError) -> Int { try await store.expire(before: before) }

        func claim(key: String, app: String, job: String, again: Bool, now: Int64, freeBefore: Int64) async throws(RegistryError) -> String? {
            try await store.claim(key: key, app: app, job: job, again: again, now: now, freeBefore: freeBefore)
        }
    }

    static func record(_ token: String) -> DeliveryRecord {
        DeliveryRecord(jobID: "j", app: "demo", token: token, outcome: "delivered", status: 200, attempts: 1, at: Int64(Date().timeIntervalSince1970 * 1000))
    }

    @Test("two batches in flight: the second, committed first, gives its slots back and ends a sync only after the first")
    func inOrder() async throws {
        let ledger = try HeldFirstWrite()
        let writer = LedgerWriter(ledger: ledger, retentionDays: 30, logger: Logger(label: "test.writer"))
        let running = Task { try await writer.run() }
        defer { running.cancel() }
        var events = ledger.events.makeAsyncIterator()
        let given = Mutex<[String]>([])
        await writer.append(Self.record("a")) { given.withLock { $0.append("a") } }
        #expect(await events.next() == "start 1")
        await writer.append(Self.record("b")) { given.withLock { $0.append("b") } }
        #expect(await events.next() == "start 2")
        #expect(await events.next() == "end 2", "the second batch is written while the first is held")
        let synced = Task {
            await writer.sync()
            return given.withLock { $0 }
        }
        // Give the callbacks and the sync every chance to run too early.
        for _ in 0..<100 { await Task.yield() }
        try await Task.sleep(for: .milliseconds(50))
        #expect(given.withLock { $0 }.isEmpty, "b's slot came back before a was written")
        ledger.open()
        #expect(await events.next() == "end 1")
        #expect(await synced.value == ["a", "b"])
        #expect(try await ledger.store.finals(job: "j", app: "demo", tokens: ["a", "b"]).count == 2)
    }
}
