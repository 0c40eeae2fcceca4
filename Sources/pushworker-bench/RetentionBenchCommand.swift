import ArgumentParser
import Foundation
import Logging
import PostgresStores
import SQLiteStores
import Stores
import Synchronization

/// Retention on a large ledger while results keep coming: fills a ledger with ROWS records past
/// the retention, then expires them while a writer goes on writing batches as a worker's ledger
/// writer does, and prints the writer's batch latency before and during the expiry.
struct RetentionBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retention",
        abstract: "Expire ROWS old ledger records while batches keep being written: the writes' latency before and during the expiry.")

    @Option(help: "Records past the retention to fill the ledger with.") var rows = 10_000_000
    @Option(help: "An SQLite file to use (made); else --postgres.") var sqlite: String?
    @Option(help: "An empty PostgreSQL database's URL.") var postgres: String?
    @Option(help: "Records per write, as the worker's writer takes them at most.") var batch = 2_000
    @Flag(help: "Fill the ledger, then stop: for its size on disk (the SQLite file's is printed; ask PostgreSQL for the partitions').")
    var fillOnly = false

    func run() async throws {
        let ledger: any LedgerStore
        if let sqlite {
            ledger = try SQLiteLedgerStore(path: sqlite)
        } else if let postgres {
            let store = try await PostgresRegistryStore(url: postgres, logger: Logger(label: "bench.retention"))
            try await store.ledger.prepareLedger(rebuildingIndexes: true)
            ledger = store.ledger
        } else {
            throw ValidationError("name --sqlite FILE or --postgres URL")
        }
        let day: Int64 = 86_400_000
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        func records(_ count: Int, from start: Int, at: Int64) -> [DeliveryRecord] {
            (start..<(start + count)).map { index in
                DeliveryRecord(
                    jobID: "job-\(index / 1000)", chunk: "\(index / 1000 % 50 + 1)/50", app: "bench", token: SyntheticRegistry.randomToken(index),
                    user: "user-\(index)", outcome: "delivered", status: 200, apnsID: "00000000-0000-0000-0000-\(String(format: "%012d", index))",
                    attempts: 1, at: at + Int64(index / 10_000))
            }
        }
        let filling = ContinuousClock.now
        var written = 0
        while written < rows {
            let count = min(20_000, rows - written)
            try await ledger.write(records(count, from: written, at: now - 40 * day))
            written += count
        }
        print(String(format: "filled: %d records 40 days old in %.1f s", rows, (ContinuousClock.now - filling) / .seconds(1)))
        if fillOnly {
            if let sqlite {
                let size = ["", "-wal"].compactMap { try? FileManager.default.attributesOfItem(atPath: sqlite + $0)[.size] as? Int }.reduce(0, +)
                print(String(format: "SQLite file (with its WAL): %.1f MiB = %d bytes per record", Double(size) / 1_048_576, size / rows))
            }
            return
        }

        /// Writes batches of today's records until `stop`; the latency of each, in ms.
        func writeBatches(until stop: @escaping @Sendable () -> Bool, offset: Int) async throws -> [Double] {
            var latencies: [Double] = []
            var next = offset
            repeat {
                let start = ContinuousClock.now
                try await ledger.write(records(batch, from: next, at: now))
                latencies.append((ContinuousClock.now - start) / .milliseconds(1))
                next += batch
            } while !stop()
            return latencies
        }
        func summary(_ latencies: [Double]) -> String {
            let sorted = latencies.sorted()
            guard !sorted.isEmpty else { return "no writes" }
            return String(format: "%d batches of %d: p50 %.1f ms, p99 %.1f ms, max %.1f ms", sorted.count, batch,
                sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)], sorted.last!)
        }
        let deadline = ContinuousClock.now + .seconds(10)
        let before = try await writeBatches(until: { ContinuousClock.now >= deadline }, offset: rows)
        print("writes before the expiry: " + summary(before))

        let expiring = ContinuousClock.now
        let done = ManagedFlag()
        let during = Task { try await writeBatches(until: { done.value }, offset: rows * 2) }
        let removed = try await ledger.expire(before: now - 30 * day)
        done.set()
        let duringLatencies = try await during.value
        print(String(format: "expiry: %d records dropped in %.1f s", removed, (ContinuousClock.now - expiring) / .seconds(1)))
        print("writes during the expiry: " + summary(duringLatencies))
    }
}

/// A flag set once, read from another task.
final class ManagedFlag: Sendable {
    private let flag = Atomic(false)
    var value: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}
