import APNs
import Foundation

/// What an app's jobs that name no `expiration` get (`apps[].default_expiration`). Without it no
/// `apns-expiration` header is sent, and APNs stores the notification and retries for as long as
/// it chooses; an app whose pushes are worthless late (a ride arriving, a code) says so once here
/// instead of in every producer.
public enum DefaultExpiration: Sendable, Hashable, Decodable, CustomStringConvertible {
    /// APNs tries once and does not store it (`apns-expiration: 0`).
    case immediate
    /// Valid this many seconds after the job was published.
    case afterSeconds(Int)

    /// A year, the longest `expiration.after_seconds` a job may ask for.
    public static let maximumSeconds = 31_536_000

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let seconds = try? container.decode(Int.self) {
            guard (0...Self.maximumSeconds).contains(seconds) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "\(seconds) is not between 0 (immediate) and \(Self.maximumSeconds) seconds")
            }
            self = seconds == 0 ? .immediate : .afterSeconds(seconds)
            return
        }
        let text = try container.decode(String.self)
        guard text == "immediate" else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(text)' is not immediate or a number of seconds")
        }
        self = .immediate
    }

    /// The expiration of a job published at `enqueuedAt`.
    public func expiration(since enqueuedAt: Date) -> APNsExpiration {
        switch self {
        case .immediate: .immediately
        case .afterSeconds(let seconds): .after(.seconds(seconds), since: enqueuedAt)
        }
    }

    public var description: String {
        switch self {
        case .immediate: "immediate"
        case .afterSeconds(let seconds): "\(seconds)"
        }
    }
}
