import Stores

/// What the pipeline needs of the ledger: to hand it final results (written in batches, off the
/// send path), to wait until what it handed is written (before its job is acknowledged), and to
/// ask which devices of a job that came back already have their result. `LedgerWriter` is the
/// real one; the pipeline's tests use it over a real SQLite ledger.
public protocol PipelineLedger: Sendable {
    func append(_ records: [DeliveryRecord]) async
    /// Hands one record over and returns; `whenWritten` runs once it is written (or given up on).
    /// - Parameter othersWait: devices wait for the slot `whenWritten` gives back: the batch that
    ///   holds the record is written without a window for more to gather (on the writer's own
    ///   thread, a window already open ends; a task's ends in its own time).
    func append(_ record: DeliveryRecord, othersWait: Bool, whenWritten: @escaping @Sendable () -> Void) async
    /// Returns once every record appended before the call is written, or given up on (logged).
    func sync() async
    /// Marks a job's `results: batched` messages confirmed by the broker, and the results it
    /// published again from the ledger (`answered`, by token), so that a job that comes back
    /// does not publish them again. Returns once marked, or given up on (logged: the results are
    /// then published again if the job comes back, at least once).
    func confirm(job: String, app: String, messages: [Int64], answered: [String]) async
    /// The records held for these tokens of the job; empty when the ledger cannot be read (the
    /// devices are then sent: at least once, as without a ledger).
    func finals(job: String, app: String, tokens: [String]) async -> [String: DeliveryRecord]
    /// Takes the job's idempotency key for the fleet, or says which job holds it.
    /// - Parameter again: the job is a redelivery: its own earlier claim is not a duplicate.
    func claim(key: String, app: String, job: String, again: Bool) async -> IdempotencyClaim
}

/// What became of a job's claim on its idempotency key.
public enum IdempotencyClaim: Sendable, Equatable {
    /// Taken: the job goes on.
    case taken
    /// Taken within the window by this earlier job: nothing is sent.
    case duplicate(of: String)
    /// The store cannot say now (the job goes back to the queue).
    case unavailable(String)
}
