import Foundation

/// Which records to read: one job's, one user's or one token's, newest first, within a time
/// window, at most `limit`.
public struct DeliveryQuery: Sendable, Hashable {
    public enum Subject: Sendable, Hashable {
        case job(String)
        case user(String)
        case token(String)
    }

    public var subject: Subject
    /// Milliseconds since 1970, inclusive; nil for no bound.
    public var since: Int64?
    public var until: Int64?
    public var limit: Int

    /// The most records one query returns.
    public static let maximumLimit = 10_000

    public init(_ subject: Subject, since: Int64? = nil, until: Int64? = nil, limit: Int = 100) {
        self.subject = subject
        self.since = since
        self.until = until
        self.limit = min(max(limit, 1), Self.maximumLimit)
    }
}
