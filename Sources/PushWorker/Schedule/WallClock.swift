import Foundation
import Synchronization

/// The time of day the schedule goes by, as milliseconds since 1970. Injected, so the schedule's
/// tests move time on instead of waiting for it.
public struct WallClock: Sendable {
    public let now: @Sendable () -> Int64

    public init(now: @escaping @Sendable () -> Int64) {
        self.now = now
    }

    public static let system = WallClock { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// A clock that stands still until moved (tests).
    public static func manual(_ start: Int64) -> (clock: WallClock, advance: @Sendable (Int64) -> Void) {
        let time = Mutex(start)
        return (WallClock { time.withLock { $0 } }, { step in time.withLock { $0 += step } })
    }
}
