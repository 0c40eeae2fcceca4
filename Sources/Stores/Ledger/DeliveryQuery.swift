import Foundation

/// Which records to read: one job's, one user's, one token's, or the job holding an idempotency
/// key's, newest first, within a time window, at most `limit`, continuing after a cursor.
public struct DeliveryQuery: Sendable, Hashable {
    public enum Subject: Sendable, Hashable {
        case job(String)
        case user(String)
        case token(String)
        /// The job that holds the key now (in any app, unless `app` names one): what a support
        /// person has when a producer logged only the key. A key is found while the ledger keeps
        /// it, `idempotency_hours` after it was taken.
        case idempotencyKey(String)
    }

    public var subject: Subject
    /// Only this app's records (and for a key, the key as this app's jobs gave it).
    public var app: String?
    /// Only the devices of this user: with `registry.auth`, the asking user, whatever the subject.
    /// In the query, not filtered after it, so that a page is full whenever more records follow.
    public var owner: String?
    /// Milliseconds since 1970, inclusive; nil for no bound.
    public var since: Int64?
    public var until: Int64?
    public var limit: Int
    /// The last record of the page before: this page starts after it in the order.
    public var after: DeliveryCursor?

    /// The most records one query returns.
    public static let maximumLimit = 10_000

    public init(
        _ subject: Subject, app: String? = nil, owner: String? = nil, since: Int64? = nil, until: Int64? = nil, limit: Int = 100,
        after: DeliveryCursor? = nil
    ) {
        self.subject = subject
        self.app = app
        self.owner = owner
        self.since = since
        self.until = until
        self.limit = min(max(limit, 1), Self.maximumLimit)
        self.after = after
    }

    /// The window as both stores bind it: `at` from `lower` to `upper`, inclusive (a range the
    /// indexes on time can use, so a page deep in a large job starts where it starts and does not
    /// walk the pages before it), and, at `upper` itself, only the records after `tie` in the order
    /// (the rest of an instant the page before ended in). The order is `at` descending, then
    /// token, job and app ascending as bytes: a device's result is once per job and app, so no
    /// two records tie, and a record written while a client pages, newer than its cursor, is in
    /// none of the pages after.
    public var bounds: (lower: Int64, upper: Int64, tie: DeliveryCursor?) {
        let lower = since ?? .min
        let upper = min(until ?? .max, after?.at ?? .max)
        // A cursor older than `until` bounds the window itself; one newer has nothing to break.
        return (lower, upper, after.flatMap { $0.at == upper ? $0 : nil })
    }
}
