import Foundation
import Logging
import PushWorker
import SQLiteStores
import Stores
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

/// The writer with two batches in flight (as on PostgreSQL): a later batch that commits first
/// must not give its devices' slots back, nor end a job's `sync`, before the batch before it.
@Suite("The ledger writer")
struct LedgerWriterTests {
    /// The real SQLite ledger, with the first write held until the test opens it and a report
    /// of each write's start and end: the timing of a slow server, around a real store.
    final class HeldFirstWrite: BlockingLedgerWrites {
        let store: SQLiteLedgerStore
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("writer-\(UUID().uuidString.prefix(8)).db").path
        private let state = Mutex<(writes: Int, events: [String], sizes: [Int])>((0, [], []))
        private let gate: OpenOnce
        let concurrentWrites: Int

        /// - Parameter holdFirst: false for a store that writes at once.
        init(holdFirst: Bool = true, concurrentWrites: Int = 2) throws {
            store = try SQLiteLedgerStore(path: path)
            self.concurrentWrites = concurrentWrites
            gate = OpenOnce(open: !holdFirst)
        }

        /// The number of records of each write, in order.
        var sizes: [Int] { state.withLock { $0.sizes } }

        var events: [String] { state.withLock { $0.events } }

        /// Whether `event` happened; gives up after `limit` without it (a deadline on a wait
        /// for one step, not on the test).
        func saw(_ event: String, within limit: Duration = .seconds(30)) async -> Bool {
            let clock = ContinuousClock(), end = clock.now + limit
            while clock.now < end {
                if events.contains(event) { return true }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return events.contains(event)
        }

        private func record(_ event: String) { state.withLock { $0.events.append(event) } }

        func open() { gate.open() }

        func write(_ records: [DeliveryRecord]) async throws(StoreError) {
            let number = state.withLock { state in
                state.writes += 1
                state.sizes.append(records.count)
                return state.writes
            }
            record("start \(number)")
            if number == 1 { await gate.wait() }
            try await store.write(records)
            record("end \(number)")
        }

        /// From the writer's own thread (a store of one write at a time): written at once, never held.
        func writeNow(_ records: [DeliveryRecord]) throws(StoreError) {
            let number = state.withLock { state in
                state.writes += 1
                state.sizes.append(records.count)
                return state.writes
            }
            record("start \(number) on the writer's thread")
            try store.writeNow(records)
            record("end \(number)")
        }

        func finals(job: String, app: String, tokens: [String]) async throws(StoreError) -> [String: DeliveryRecord] {
            try await store.finals(job: job, app: app, tokens: tokens)
        }

        func confirm(job: String, app: String, messages: [Int64], answered: [String], at: Int64) async throws(StoreError) {
            try await store.confirm(job: job, app: app, messages: messages, answered: answered, at: at)
        }

        func deliveries(_ query: DeliveryQuery) async throws(StoreError) -> [DeliveryRecord] { try await store.deliveries(query) }

        func expire(before: Int64) async throws(StoreError) -> Int { try await store.expire(before: before) }

        func expireKeys(takenBefore: Int64) async throws(StoreError) -> Int { try await store.expireKeys(takenBefore: takenBefore) }

        func claim(key: String, app: String, job: String, again: Bool, now: Int64, freeBefore: Int64) async throws(StoreError) -> String? {
            try await store.claim(key: key, app: app, job: job, again: again, now: now, freeBefore: freeBefore)
        }
    }

    /// Runs `body` while `writer` runs in a service group, then shuts the group down, also when
    /// `body` throws.
    static func whileRunning(_ writer: LedgerWriter, _ body: () async throws -> Void) async throws {
        let group = ServiceGroup(services: [writer], logger: Logger(label: "test.writer"))
        let running = Task { try await group.run() }
        do {
            try await body()
        } catch {
            await group.triggerGracefulShutdown()
            try? await running.value
            throw error
        }
        await group.triggerGracefulShutdown()
        try await running.value
    }

    static func record(_ token: String) -> DeliveryRecord {
        DeliveryRecord(jobID: "j", app: "demo", token: token, outcome: "delivered", status: 200, attempts: 1, at: Int64(Date().timeIntervalSince1970 * 1000))
    }

    @Test("two batches in flight: the second, committed first, gives its slots back and ends a sync only after the first")
    func inOrder() async throws {
        let ledger = try HeldFirstWrite()
        defer { try? FileManager.default.removeItem(atPath: ledger.path) }
        let logger = Logger(label: "test.writer")
        let writer = LedgerWriter(ledger: ledger, retentionDays: 30, logger: logger)
        try await Self.whileRunning(writer) {
            // Whatever happens, the held write ends, so the writer can shut down.
            defer { ledger.open() }
            let given = Mutex<[String]>([])
            await writer.append(Self.record("a"), othersWait: false) { given.withLock { $0.append("a") } }
            #expect(await ledger.saw("start 1"))
            await writer.append(Self.record("b"), othersWait: false) { given.withLock { $0.append("b") } }
            #expect(await ledger.saw("end 2"), "the second batch is written while the first is held: \(ledger.events)")
            let synced = Task {
                await writer.sync()
                return given.withLock { $0 }
            }
            // Give the callbacks and the sync every chance to run too early.
            for _ in 0..<100 { await Task.yield() }
            try await Task.sleep(for: .milliseconds(50))
            #expect(given.withLock { $0 }.isEmpty, "b's slot came back before a was written")
            ledger.open()
            #expect(await ledger.saw("end 1"))
            #expect(await synced.value == ["a", "b"])
            #expect(try await ledger.store.finals(job: "j", app: "demo", tokens: ["a", "b"]).count == 2)
        }
    }

    @Test("group commit: once busy, a record waits for the records that follow it and they are written in one transaction",
        arguments: [false, true])
    func groupCommit(ownThread: Bool) async throws {
        let ledger = try HeldFirstWrite(holdFirst: false, concurrentWrites: 1)
        defer { try? FileManager.default.removeItem(atPath: ledger.path) }
        let logger = Logger(label: "test.writer")
        // Busy for two minutes after each commit, and a window long enough that a machine
        // stalled for seconds (a build beside the tests) still appends the records that follow
        // inside it. The test waits the window out.
        let writer = LedgerWriter(
            ledger: ledger, retentionDays: 30, commitWindow: .seconds(15), busyGap: .seconds(120), ownThread: ownThread, logger: logger)
        try await Self.whileRunning(writer) {
            // The first record finds the writer idle: written alone, at once.
            await writer.append([Self.record("a")])
            await writer.sync()
            #expect(ledger.sizes == [1])
            let given = Mutex<[String]>([])
            for token in ["b", "c", "d"] {
                await writer.append(Self.record(token), othersWait: false) { given.withLock { $0.append(token) } }
                // Time enough for a writer that did not wait to write each alone.
                try await Task.sleep(for: .milliseconds(50))
            }
            await writer.sync()
            #expect(ledger.sizes == [1, 3], "the three records that came together: \(ledger.sizes)")
            #expect(ledger.events.contains { $0.hasSuffix("on the writer's thread") } == ownThread, "written where asked: \(ledger.events)")
            #expect(given.withLock { $0 } == ["b", "c", "d"])
            #expect(try await ledger.store.finals(job: "j", app: "demo", tokens: ["a", "b", "c", "d"]).count == 4)
        }
    }

    @Test("a record whose slot other devices wait for is written at once, busy or not: the window would only hold the slot",
        arguments: [false, true])
    func noWindowWhileOthersWait(ownThread: Bool) async throws {
        let ledger = try HeldFirstWrite(holdFirst: false, concurrentWrites: 1)
        defer { try? FileManager.default.removeItem(atPath: ledger.path) }
        let logger = Logger(label: "test.writer")
        // Busy all along, and a window of a minute: a record that waited for it is plain.
        let writer = LedgerWriter(
            ledger: ledger, retentionDays: 30, commitWindow: .seconds(60), busyGap: .seconds(3_600), ownThread: ownThread, logger: logger)
        try await Self.whileRunning(writer) {
            await writer.append([Self.record("a")])
            await writer.sync()
            let given = Mutex<[String]>([])
            for token in ["b", "c", "d"] {
                let started = ContinuousClock.now
                await writer.append(Self.record(token), othersWait: true) { given.withLock { $0.append(token) } }
                await writer.sync()
                // Half the window: only a record that waited for it, or a machine stalled that long.
                let waited = ContinuousClock.now - started
                #expect(waited < .seconds(30), "the record of \(token) waited \(waited) for the window")
            }
            #expect(ledger.sizes == [1, 1, 1, 1], "each written alone: \(ledger.sizes)")
            #expect(given.withLock { $0 } == ["b", "c", "d"])
        }
    }

    @Test("on the writer's own thread, a record whose slot others wait for ends a window already open: written with those gathered so far")
    func urgentRecordEndsTheWindow() async throws {
        let ledger = try HeldFirstWrite(holdFirst: false, concurrentWrites: 1)
        defer { try? FileManager.default.removeItem(atPath: ledger.path) }
        let logger = Logger(label: "test.writer")
        let writer = LedgerWriter(ledger: ledger, retentionDays: 30, commitWindow: .seconds(60), busyGap: .seconds(3_600), logger: logger)
        try await Self.whileRunning(writer) {
            await writer.append([Self.record("a")])
            await writer.sync()
            let started = ContinuousClock.now
            // Busy: "b" opens a window of a minute; "c", whose slot others wait for, ends it.
            await writer.append(Self.record("b"), othersWait: false) {}
            try await Task.sleep(for: .milliseconds(50))
            await writer.append(Self.record("c"), othersWait: true) {}
            await writer.sync()
            let waited = ContinuousClock.now - started
            #expect(waited < .seconds(30), "the window ran its course: \(waited)")
            #expect(ledger.sizes == [1, 2], "b and c in one write: \(ledger.sizes)")
        }
    }

    @Test("at start the writer forgets the idempotency keys past their window and keeps the others: a key's job is found by it only while it holds")
    func keysExpireAtTheirWindow() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("writer-keys-\(UUID().uuidString.prefix(8)).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let ledger = try SQLiteLedgerStore(path: path)
        let now = Int64(Date().timeIntervalSince1970 * 1000), hour: Int64 = 3_600_000
        for (key, taken) in [("lapsed", now - 3 * hour), ("held", now - hour)] {
            #expect(try await ledger.claim(key: key, app: "demo", job: "job-\(key)", again: false, now: taken, freeBefore: taken - 2 * hour) == nil)
            try await ledger.write([DeliveryRecord(jobID: "job-\(key)", app: "demo", token: "ab", outcome: "delivered", attempts: 1, at: taken)])
        }
        let logger = Logger(label: "test.writer")
        // Thirty days' retention, a two-hour window: only the window can take the lapsed key.
        let writer = LedgerWriter(ledger: ledger, retentionDays: 30, idempotencyHours: 2, logger: logger)
        try await Self.whileRunning(writer) {
            // The one step awaited: the first expiry, which runs as the writer starts.
            var polls = 0
            while try await !ledger.deliveries(DeliveryQuery(.idempotencyKey("lapsed"))).isEmpty, polls < 3_000 {
                try await Task.sleep(for: .milliseconds(10))
                polls += 1
            }
            #expect(try await ledger.deliveries(DeliveryQuery(.idempotencyKey("lapsed"))).isEmpty, "the lapsed key still finds its job")
            #expect(try await ledger.deliveries(DeliveryQuery(.idempotencyKey("held"))).map(\.jobID) == ["job-held"])
            #expect(try await ledger.deliveries(DeliveryQuery(.job("job-lapsed"))).count == 1, "the job's records stay until the retention")
        }
    }
}
