import Foundation
import Logging
import Registry
import ServiceLifecycle

/// Writes final results to the ledger in batches, off the send path: devices hand their record
/// over and go on; one task writes whatever has gathered, in one transaction, so the jobs of a
/// busy worker share each commit. A job waits (`sync`) only at its end, before it is
/// acknowledged, so that a job that comes back after a fault finds every device it had finished.
///
/// Memory is bounded: past `maximumPending` records waiting, `append` waits for the writer. A
/// write that keeps failing (the store down) is retried, then its records are given up on with an
/// error in the log, and the jobs go on: their results were published already.
/// Once a day (and at start) it drops what is older than the retention.
public final class LedgerWriter: DeliveryLedgerWriting, Service {
    /// The store it writes to.
    public let ledger: any DeliveryLedger
    private let retention: Duration
    /// How long a job's idempotency key keeps another job of the same key from being sent.
    private let idempotencyWindow: Duration
    private let buffer = LedgerBuffer()
    private let logger: Logger

    /// Records written in one transaction at most.
    static let batchSize = 2_000
    static let maximumPending = 50_000
    static let attempts = 5

    public init(ledger: any DeliveryLedger, retentionDays: Int, idempotencyHours: Int = 24, logger: Logger) {
        self.ledger = ledger
        retention = .seconds(retentionDays * 86_400)
        idempotencyWindow = .seconds(idempotencyHours * 3600)
        self.logger = logger
    }

    public func append(_ records: [DeliveryRecord]) async {
        guard !records.isEmpty else { return }
        await buffer.append(records, maximumPending: Self.maximumPending)
    }

    public func sync() async {
        await buffer.sync()
    }

    public func finals(job: String, app: String, tokens: [String]) async -> [String: DeliveryRecord] {
        do {
            return try await ledger.finals(job: job, app: app, tokens: tokens)
        } catch {
            logger.error("cannot read the ledger; the job's devices are sent as without one", metadata: ["job": "\(job)", "error": "\(error)"])
            return [:]
        }
    }

    public func claim(key: String, app: String, job: String, again: Bool) async -> IdempotencyClaim {
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
        do {
            let holder = try await ledger.claim(
                key: key, app: app, job: job, again: again, now: now, freeBefore: now - Int64(idempotencyWindow.components.seconds) * 1000)
            return holder.map { .duplicate(of: $0) } ?? .taken
        } catch {
            return .unavailable(error.message)
        }
    }

    /// Writes until a graceful shutdown, then writes what is left.
    public func run() async throws {
        let expiry = Task { await expireDaily() }
        defer { expiry.cancel() }
        await withGracefulShutdownHandler {
            while let batch = await buffer.take(upTo: Self.batchSize) {
                await write(batch)
            }
            await buffer.finish()
        } onGracefulShutdown: {
            Task { await self.buffer.close() }
        }
    }

    private func write(_ batch: [DeliveryRecord]) async {
        for attempt in 1...Self.attempts {
            do {
                try await ledger.write(batch)
                await buffer.written(batch.count)
                return
            } catch {
                if attempt == Self.attempts {
                    logger.error("cannot write to the ledger; these results are not kept there (they were published)", metadata: [
                        "records": "\(batch.count)", "error": "\(error)",
                    ])
                } else {
                    try? await Task.sleep(for: .milliseconds(100 * attempt * attempt))
                }
            }
        }
        await buffer.written(batch.count)
    }

    private func expireDaily() async {
        while !Task.isCancelled {
            let cutoff = Int64((Date().timeIntervalSince1970 - Double(retention.components.seconds)) * 1000)
            do {
                let removed = try await ledger.expire(before: cutoff)
                if removed > 0 { logger.info("ledger retention: old deliveries dropped", metadata: ["records": "\(removed)"]) }
            } catch {
                logger.warning("ledger retention failed; tried again in an hour", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(3600))
                continue
            }
            try? await Task.sleep(for: .seconds(86_400))
        }
    }
}

/// The records waiting for the writer, and the jobs waiting for theirs to be written.
actor LedgerBuffer {
    private var pending: [DeliveryRecord] = []
    /// Records appended and written so far: a sync waits until `written` reaches the count
    /// appended when it asked.
    private var appended = 0
    private var written = 0
    private var closed = false
    /// The writer has stopped: nothing appended now is written, and nobody waits for it.
    private var finished = false
    private var syncs: [(upTo: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var taker: CheckedContinuation<Void, Never>?
    private var roomWaiters: [CheckedContinuation<Void, Never>] = []

    func append(_ records: [DeliveryRecord], maximumPending: Int) async {
        guard !finished else { return }
        while pending.count >= maximumPending && !closed {
            await withCheckedContinuation { roomWaiters.append($0) }
        }
        pending += records
        appended += records.count
        taker?.resume()
        taker = nil
    }

    func sync() async {
        let target = appended
        guard written < target, !finished else { return }
        await withCheckedContinuation { syncs.append((target, $0)) }
    }

    /// The next records to write; nil once closed and empty.
    func take(upTo count: Int) async -> [DeliveryRecord]? {
        while pending.isEmpty {
            if closed { return nil }
            await withCheckedContinuation { taker = $0 }
        }
        let batch = Array(pending.prefix(count))
        pending.removeFirst(batch.count)
        let waiting = roomWaiters
        roomWaiters = []
        for waiter in waiting { waiter.resume() }
        return batch
    }

    func written(_ count: Int) {
        written += count
        let done = syncs.filter { $0.upTo <= written }
        syncs.removeAll { $0.upTo <= written }
        for sync in done { sync.continuation.resume() }
    }

    func finish() {
        finished = true
        let waiting = syncs
        syncs = []
        for sync in waiting { sync.continuation.resume() }
    }

    /// No more takes wait: the writer writes what is left and stops.
    func close() {
        closed = true
        taker?.resume()
        taker = nil
        let waiting = roomWaiters
        roomWaiters = []
        for waiter in waiting { waiter.resume() }
    }
}
