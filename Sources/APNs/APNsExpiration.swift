import Foundation

/// When APNs should stop trying to deliver: the `apns-expiration` header.
public enum APNsExpiration: Sendable, Hashable {
    /// Try once, never store (header value 0).
    case immediately
    /// Stop trying at this moment (Unix seconds).
    case at(Date)
    /// Stop trying this long after `since` (when the job was enqueued, say).
    case after(Duration, since: Date)

    /// The moment after which the notification is worthless, or nil for `immediately`.
    public var deadline: Date? {
        switch self {
        case .immediately: nil
        case .at(let date): date
        case .after(let duration, let since): since.addingTimeInterval(duration / .seconds(1))
        }
    }

    /// The header value: Unix seconds, or 0 for `immediately`.
    public var headerValue: String {
        guard let deadline else { return "0" }
        return String(Int64(deadline.timeIntervalSince1970.rounded(.down)))
    }

    /// Whether the moment has passed, so sending would be pointless.
    public func hasPassed(at now: Date = Date()) -> Bool {
        guard let deadline else { return false }
        return deadline <= now
    }
}
