import Foundation
import Logging
import Stores
import ServiceLifecycle
import Synchronization

/// Writes final results to the ledger in batches, off the send path: devices hand their record
/// over and go on; the writer (a thread of its own for SQLite, a task otherwise) writes whatever
/// has gathered, in one transaction, so the jobs of a busy worker share each commit. A job waits
/// (`sync`) only at its end, before it is acknowledged, so that a job that comes back after a
/// fault finds every device it had finished.
///
/// Memory is bounded: past `maximumPending` records waiting, `append` waits for the writer. A
/// write that keeps failing (the store down) is retried, then its records are given up on with an
/// error in the log, and the jobs go on: those devices are then as without a ledger (sent again
/// if their job comes back), and their slots come back all the same.
/// Once a day (and at start) it drops what is older than the retention, and once an hour the
/// idempotency keys past their window.
public final class LedgerWriter: PipelineLedger, Service {
    /// The store it writes to.
    public let ledger: any LedgerStore
    private let retention: Duration
    /// How long a job's idempotency key keeps another job of the same key from being sent.
    private let idempotencyWindow: Duration
    private let buffer = LedgerBuffer()
    private let logger: Logger

    /// Records written in one transaction at most.
    static let batchSize = 2_000
    static let maximumPending = 50_000
    static let attempts = 5
    /// Group commit: while records come faster than one per `busyGap` (2 ms), the writer lets a batch
    /// gather for `commitWindow` (500 µs) after its first record. A commit (its transaction, its WAL pages,
    /// its hand-offs between threads) cost a one-device job more than the rest of its record;
    /// a job waits for it at its end, so the window is the latency a busy worker adds to a job.
    /// At a lower rate each record is written as it comes, and so is a batch holding a record
    /// whose slot other devices wait for (a broadcast that has used its `max_in_flight`): there
    /// the window would only hold slots, and the rate follows how long a device holds one.
    private let commitWindow: Duration
    private let busyGap: Duration
    /// When the last batch was written.
    private let lastWritten: Mutex<ContinuousClock.Instant>

    /// Writes a store that takes blocking writes (`BlockingLedgerWrites`) from a thread of its own.
    private let ownThread: Bool

    /// - Parameter ownThread: false writes such a store from a task too, as any other (tests
    ///   measure both ways).
    public init(
        ledger: any LedgerStore, retentionDays: Int, idempotencyHours: Int = 24, commitWindow: Duration = .microseconds(500),
        busyGap: Duration = .milliseconds(2), ownThread: Bool = true, logger: Logger
    ) {
        self.ownThread = ownThread
        self.commitWindow = commitWindow
        self.busyGap = busyGap
        lastWritten = Mutex(.now - busyGap)
        self.ledger = ledger
        retention = .seconds(retentionDays * 86_400)
        idempotencyWindow = .seconds(idempotencyHours * 3600)
        self.logger = logger
    }

    public func append(_ records: [DeliveryRecord]) async {
        guard !records.isEmpty else { return }
        await buffer.append(records, maximumPending: Self.maximumPending)
    }

    public func append(_ record: DeliveryRecord, othersWait: Bool, whenWritten written: @escaping @Sendable () -> Void) async {
        await buffer.append([record], maximumPending: Self.maximumPending, urgent: othersWait, written: written)
    }

    public func sync() async {
        await buffer.sync()
    }

    public func confirm(job: String, app: String, messages: [Int64], answered: [String]) async {
        let at = DeliveryRecord.milliseconds()
        if let error = await Self.tried({ () async throws(StoreError) in
            try await ledger.confirm(job: job, app: app, messages: messages, answered: answered, at: at)
        }) {
            logger.warning("cannot mark results confirmed in the ledger; if their job comes back, these results are published again", metadata: [
                "job": "\(job)", "messages": "\(messages.count)", "answered": "\(answered.count)", "error": "\(error)",
            ])
        }
    }

    /// Runs a store's write up to `attempts` times, a little longer apart each time (a store
    /// briefly away); returns the last error when every attempt failed.
    private static func tried(_ body: () async throws(StoreError) -> Void) async -> StoreError? {
        for attempt in 1...attempts {
            do {
                try await body()
                return nil
            } catch {
                if attempt == attempts { return error }
                try? await Task.sleep(for: .milliseconds(pause(after: attempt)))
            }
        }
        return nil
    }

    /// `tried` on the writer's own thread, which the pauses block (it has nothing else to do).
    private static func triedNow(_ body: () throws(StoreError) -> Void) -> StoreError? {
        for attempt in 1...attempts {
            do {
                try body()
                return nil
            } catch {
                if attempt == attempts { return error }
                Thread.sleep(forTimeInterval: Double(pause(after: attempt)) / 1000)
            }
        }
        return nil
    }

    /// Milliseconds between a failed attempt and the next.
    private static func pause(after attempt: Int) -> Int { 100 * attempt * attempt }

    public func finals(job: String, app: String, tokens: [String]) async -> [String: DeliveryRecord] {
        do {
            return try await ledger.finals(job: job, app: app, tokens: tokens)
        } catch {
            logger.error("cannot read the ledger; the job's devices are sent as without one", metadata: ["job": "\(job)", "error": "\(error)"])
            return [:]
        }
    }

    public func claim(key: String, app: String, job: String, again: Bool) async -> IdempotencyClaim {
        let now = DeliveryRecord.milliseconds()
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
        let expiry = Task { await expire() }
        defer { expiry.cancel() }
        let concurrent = max(1, ledger.concurrentWrites)
        if ownThread, concurrent == 1, let store = ledger as? any BlockingLedgerWrites {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    let thread = Thread { [self] in
                        Thread.current.name = "ledger-write"
                        writeOnThisThread(to: store)
                        done.resume()
                    }
                    thread.start()
                }
            } onGracefulShutdown: {
                self.buffer.close()
            }
            return
        }
        await withGracefulShutdownHandler {
            // Up to `concurrent` batches are written at once, and each is marked written only
            // after the one before it: a job's `sync` waits for every record appended before it.
            var writing: [Task<Void, Never>] = []
            while let (batch, callbacks) = await buffer.take(upTo: Self.batchSize, gathering: window) {
                if concurrent == 1 {
                    // One write at a time: written here, without a task (and a thread's wake) per batch.
                    await write(batch)
                    buffer.written(batch.count, callbacks: callbacks)
                    lastWritten.withLock { $0 = .now }
                    continue
                }
                let before = writing.last
                writing.append(Task {
                    await self.write(batch)
                    await before?.value
                    self.buffer.written(batch.count, callbacks: callbacks)
                    self.lastWritten.withLock { $0 = .now }
                })
                if writing.count >= concurrent { await writing.removeFirst().value }
            }
            for task in writing { await task.value }
            buffer.finish()
        } onGracefulShutdown: {
            self.buffer.close()
        }
    }

    /// The writer's loop on a thread of its own: it sleeps in the buffer until records come (or
    /// for the window), writes them, and gives their slots back, with no task, timer or queue
    /// between; returns once closed and everything is written.
    private func writeOnThisThread(to store: any BlockingLedgerWrites) {
        while let (batch, callbacks) = buffer.takeWaiting(upTo: Self.batchSize, gathering: window) {
            if let error = Self.triedNow({ () throws(StoreError) in try store.writeNow(batch) }) { gaveUp(batch, error) }
            buffer.written(batch.count, callbacks: callbacks)
            lastWritten.withLock { $0 = .now }
        }
        buffer.finish()
    }

    private func write(_ batch: [DeliveryRecord]) async {
        if let error = await Self.tried({ () async throws(StoreError) in try await ledger.write(batch) }) { gaveUp(batch, error) }
    }

    private func gaveUp(_ batch: [DeliveryRecord], _ error: StoreError) {
        logger.error("cannot write to the ledger; these results are not kept there, and their devices are as without a ledger if their job comes back", metadata: [
            "records": "\(batch.count)", "error": "\(error)",
        ])
    }

    /// How long to let a batch gather: the window while busy (the last commit ended a moment
    /// ago, so more records are on their way), else none.
    private func window() -> Duration? {
        lastWritten.withLock { ContinuousClock.now - $0 < busyGap } ? commitWindow : nil
    }

    /// Every hour, the idempotency keys past their window: free already (`claim`), and kept no
    /// longer they would still lead `deliveries --key` to a job they no longer guard, for up to
    /// the retention. At start and then daily (hourly after a failure), the records past the
    /// retention.
    private func expire() async {
        var retentionDue = ContinuousClock.now
        while !Task.isCancelled {
            let now = DeliveryRecord.milliseconds()
            do {
                let removed = try await ledger.expireKeys(takenBefore: now - Int64(idempotencyWindow.components.seconds) * 1000)
                if removed > 0 { logger.debug("idempotency keys past their window forgotten", metadata: ["keys": "\(removed)"]) }
            } catch {
                logger.warning("idempotency keys' expiry failed; tried again in an hour", metadata: ["error": "\(error)"])
            }
            if ContinuousClock.now >= retentionDue {
                do {
                    let removed = try await ledger.expire(before: now - Int64(retention.components.seconds) * 1000)
                    if removed > 0 { logger.info("ledger retention: old deliveries dropped", metadata: ["records": "\(removed)"]) }
                    retentionDue = .now + .seconds(86_400)
                } catch {
                    logger.warning("ledger retention failed; tried again in an hour", metadata: ["error": "\(error)"])
                }
            }
            try? await Task.sleep(for: .seconds(3600))
        }
    }
}

/// The records waiting for the writer, what to do once each is written, and the jobs waiting for
/// theirs. A lock, not an actor: a device hands its record over without a suspension of its own.
final class LedgerBuffer: Sendable {
    private struct State {
        var pending: [DeliveryRecord] = []
        /// Called once the record at the same place in `pending` is written (a device's slot given back).
        var callbacks: [(@Sendable () -> Void)?] = []
        /// Records appended and written so far: a sync waits until `written` reaches the count
        /// appended when it asked.
        var appended = 0
        var written = 0
        var closed = false
        /// The writer has stopped: nothing appended now is written, and nobody waits for it.
        var finished = false
        var syncs: [(upTo: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var taker: CheckedContinuation<Void, Never>?
        /// A record waiting has others waiting for its slot: no window for the batch that holds
        /// it, which would only keep those others waiting. Cleared when the whole buffer is taken
        /// (after a partial take the next batch goes without a window too: full already, or
        /// close to it).
        var urgent = false
        /// The writer's thread sleeps in `takeWaiting` until `wakeup` is signalled: whoever finds
        /// this set clears it and signals, so each sleep gets one signal.
        var threadWaits = false
        /// The thread's sleep is a window (it takes the batch when it ends anyway): only an urgent
        /// record ends it early.
        var windowOpen = false
        var roomWaiters: [CheckedContinuation<Void, Never>] = []

        /// Whether a batch may wait for more records: some wait, fewer than a batch, none urgent.
        func mayGather(toward count: Int) -> Bool {
            !pending.isEmpty && pending.count < count && !closed && !urgent
        }
    }

    private let state = Mutex(State())
    /// Wakes the writer's thread: signalled once per time it was found waiting (`threadWaits`,
    /// cleared by whoever signals), so a wake is never lost, and a window that ran out before
    /// its signal came takes that signal in, so none is left over to end the next one.
    private let wakeup = DispatchSemaphore(value: 0)

    /// Adds the records; `written` runs once they are written (or given up on). Waits only while
    /// `maximumPending` records are waiting already.
    /// - Parameter urgent: others wait for what `written` frees: the next batch is taken without a window.
    func append(_ records: [DeliveryRecord], maximumPending: Int, urgent: Bool = false, written: (@Sendable () -> Void)? = nil) async {
        guard !records.isEmpty else {
            written?()
            return
        }
        while true {
            let outcome = state.withLock { state -> (done: Bool, taker: CheckedContinuation<Void, Never>?, runNow: Bool, wake: Bool) in
                if state.finished { return (true, nil, true, false) }
                guard state.pending.count < maximumPending || state.closed else { return (false, nil, false, false) }
                // A batch's records (a results message's) mostly find the writer's buffer
                // empty: kept as handed over, they are not copied record by record (a dozen
                // strings retained each). A single device's record goes into the room `take`
                // reserved.
                if state.pending.isEmpty, records.count > 1 { state.pending = records } else { state.pending += records }
                if records.count > 1 { state.callbacks.append(contentsOf: repeatElement(nil, count: records.count - 1)) }
                state.callbacks.append(written)
                state.appended += records.count
                if urgent { state.urgent = true }
                let wake = state.threadWaits && (!state.windowOpen || urgent)
                if wake { state.threadWaits = false }
                defer { state.taker = nil }
                return (true, state.taker, false, wake)
            }
            if outcome.done {
                outcome.taker?.resume()
                if outcome.wake { wakeup.signal() }
                if outcome.runNow { written?() }
                return
            }
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    guard state.pending.count >= maximumPending, !state.closed, !state.finished else { return true }
                    state.roomWaiters.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    func sync() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                guard state.written < state.appended, !state.finished else { return true }
                state.syncs.append((state.appended, continuation))
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// The next records to write and their callbacks; nil once closed and empty.
    /// - Parameter gathering: asked once the first record is there: how long to let more gather
    ///   before taking a batch smaller than `count` (nil: take it now). No window while an
    ///   urgent record waits.
    func take(upTo count: Int, gathering: () -> Duration? = { nil }) async -> Batch? {
        var gathered = false
        while true {
            if !gathered, let window = gathering() {
                let small = state.withLock { state in state.mayGather(toward: count) }
                if small {
                    gathered = true
                    try? await Task.sleep(for: window)
                }
            }
            let taken = grab(upTo: count, threadWaitsIfEmpty: false)
            for waiter in taken.room { waiter.resume() }
            if let batch = taken.batch { return batch }
            if taken.end { return nil }
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    guard state.pending.isEmpty, !state.closed else { return true }
                    state.taker = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    typealias Batch = (records: [DeliveryRecord], callbacks: [(@Sendable () -> Void)?])

    /// Takes up to `count` records if any wait, and who waited for room.
    private func grab(upTo count: Int, threadWaitsIfEmpty: Bool) -> (batch: Batch?, end: Bool, room: [CheckedContinuation<Void, Never>]) {
        state.withLock { state -> (batch: Batch?, end: Bool, room: [CheckedContinuation<Void, Never>]) in
            guard !state.pending.isEmpty else {
                // The writer's thread sleeps next: an append or a close wakes it.
                if threadWaitsIfEmpty, !state.closed { state.threadWaits = true }
                return (nil, state.closed, [])
            }
            let batch: Batch
            if state.pending.count <= count {
                // Mostly everything gathered goes: handed over whole, no record copied.
                batch = (state.pending, state.callbacks)
                state.urgent = false
                state.pending = []
                state.callbacks = []
                state.pending.reserveCapacity(batch.records.count)
                state.callbacks.reserveCapacity(batch.records.count)
            } else {
                batch = (Array(state.pending.prefix(count)), Array(state.callbacks.prefix(count)))
                state.pending.removeFirst(count)
                state.callbacks.removeFirst(count)
            }
            defer { state.roomWaiters = [] }
            return (batch, false, state.roomWaiters)
        }
    }

    /// `take` for the writer's own thread, which it blocks: it sleeps until records come, and
    /// through the window, which an urgent record ends early.
    func takeWaiting(upTo count: Int, gathering: () -> Duration?) -> Batch? {
        var gathered = false
        while true {
            if !gathered, let window = gathering() {
                let small = state.withLock { state -> Bool in
                    let small = state.mayGather(toward: count)
                    if small { (state.threadWaits, state.windowOpen) = (true, true) }
                    return small
                }
                if small {
                    gathered = true
                    let nanoseconds = window.components.seconds * 1_000_000_000 + window.components.attoseconds / 1_000_000_000
                    let ranOut = wakeup.wait(timeout: .now() + .nanoseconds(Int(nanoseconds))) == .timedOut
                    let signalOwed = state.withLock { state in
                        defer { (state.threadWaits, state.windowOpen) = (false, false) }
                        // Ran out while an urgent record or a close was clearing the flag: its signal is on its way.
                        return ranOut && !state.threadWaits
                    }
                    if signalOwed { wakeup.wait() }
                }
            }
            let taken = grab(upTo: count, threadWaitsIfEmpty: true)
            for waiter in taken.room { waiter.resume() }
            if let batch = taken.batch { return batch }
            if taken.end { return nil }
            wakeup.wait()
        }
    }

    func written(_ count: Int, callbacks: [(@Sendable () -> Void)?]) {
        for callback in callbacks { callback?() }
        let done = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.written += count
            let written = state.written
            let done = state.syncs.filter { $0.upTo <= written }.map(\.continuation)
            state.syncs.removeAll { $0.upTo <= written }
            return done
        }
        for continuation in done { continuation.resume() }
    }

    func finish() {
        let (syncs, callbacks) = state.withLock { state -> ([CheckedContinuation<Void, Never>], [(@Sendable () -> Void)?]) in
            state.finished = true
            defer {
                state.syncs = []
                state.callbacks = []
                state.pending = []
            }
            return (state.syncs.map(\.continuation), state.callbacks)
        }
        for callback in callbacks { callback?() }
        for continuation in syncs { continuation.resume() }
    }

    /// No more takes wait: the writer writes what is left and stops.
    func close() {
        let (taker, room, wake) = state.withLock { state -> (CheckedContinuation<Void, Never>?, [CheckedContinuation<Void, Never>], Bool) in
            state.closed = true
            let wake = state.threadWaits
            defer {
                state.taker = nil
                state.roomWaiters = []
                state.threadWaits = false
            }
            return (state.taker, state.roomWaiters, wake)
        }
        taker?.resume()
        if wake { wakeup.signal() }
        for waiter in room { waiter.resume() }
    }
}
