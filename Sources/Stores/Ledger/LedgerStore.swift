import Foundation

/// Where every device's final result is kept: for operators asking what a device was sent, and
/// for a job or chunk that comes back after a fault (a node lost, a worker killed), which sends
/// nothing to a device the ledger already holds. The SQLite ledger is the embedded default;
/// the PostgreSQL one (PostgresStores) serves a fleet on many hosts. One conformance suite runs
/// on both.
public protocol LedgerStore: Sendable {
    /// Keeps the records in one transaction. A record for a (job, app, token) held already is
    /// left as first written: a device's first final result is its result.
    func write(_ records: [DeliveryRecord]) async throws(StoreError)
    /// Marks a job's `results: batched` messages confirmed by the broker, and clears the waiting
    /// message of the records whose results were published again and confirmed (`answered`, by
    /// token). Apart from the records' writes: a mark may land before or after its records, and
    /// either order is safe (a record whose mark is missing is published again, at least once; a
    /// mark with no record yet is for a device that still holds its slot).
    /// - Parameter at: milliseconds since 1970: retention drops a mark with its day.
    func confirm(job: String, app: String, messages: [Int64], answered: [String], at: Int64) async throws(StoreError)
    /// The records held for these tokens of the job (for a broadcast, the empty token), each
    /// with `resultsMessage` set only while its message is not marked confirmed.
    func finals(job: String, app: String, tokens: [String]) async throws(StoreError) -> [String: DeliveryRecord]
    /// Records by job, user, token or idempotency key, newest first, after the query's cursor
    /// (`page` reads one more to tell whether a next page follows).
    func deliveries(_ query: DeliveryQuery) async throws(StoreError) -> [DeliveryRecord]
    /// Drops the records of days wholly before `before` (milliseconds since 1970) in steps that
    /// never hold the writers up for long; returns how many went.
    func expire(before: Int64) async throws(StoreError) -> Int
    /// Takes an idempotency key for a job, the store deciding between workers that ask at once:
    /// nil when it is taken now (the key was free, or last taken before `freeBefore`, or it is
    /// this same job's again and `again` — a redelivery); else the id of the job that holds it.
    func claim(key: String, app: String, job: String, again: Bool, now: Int64, freeBefore: Int64) async throws(StoreError) -> String?
    /// Forgets the idempotency keys taken before `takenBefore` (milliseconds since 1970): a key
    /// past its window is free already (`claim`), and kept no longer it names no job it no longer
    /// guards (`deliveries` by key). Returns how many went.
    @discardableResult
    func expireKeys(takenBefore: Int64) async throws(StoreError) -> Int
    /// Batches the writer may have in flight at once: more than one only for a store whose
    /// writes do not block a thread and go over connections of their own (a server's round trip
    /// is then not spent waiting behind the batch before it).
    var concurrentWrites: Int { get }
}

extension LedgerStore {
    public var concurrentWrites: Int { 1 }
}

/// A ledger whose writes may block the caller's thread: the writer then writes from a thread of
/// its own, and a batch costs no hop to the store's queue and back (two threads woken per commit,
/// a visible share of a one-device job's CPU). SQLite's: its writes are local and short, save a
/// checkpoint of the write-ahead log now and then, which is why they stay off Swift's cooperative
/// threads.
public protocol BlockingLedgerWrites: LedgerStore {
    /// `write`, on the caller's thread.
    func writeNow(_ records: [DeliveryRecord]) throws(StoreError)
}
