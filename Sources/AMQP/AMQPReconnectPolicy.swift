import Foundation

/// Exponential backoff with full jitter between reconnect attempts, so a fleet of workers that lost
/// the broker together does not hammer it together when it comes back.
public struct AMQPReconnectPolicy: Sendable, Hashable {
    public var initialDelay: Duration
    public var maximumDelay: Duration
    public var multiplier: Double

    public init(initialDelay: Duration = .milliseconds(100), maximumDelay: Duration = .seconds(10), multiplier: Double = 2) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = multiplier
    }

    /// The delay before reconnect attempt `attempt` (0 for the first): a random point in
    /// [cap/2, cap], where cap grows geometrically up to `maximumDelay`.
    public func delay(attempt: Int) -> Duration {
        let initial = initialDelay / .seconds(1)
        let cap = min(maximumDelay / .seconds(1), initial * pow(multiplier, Double(min(attempt, 62))))
        let seconds = Double.random(in: (cap / 2)...max(cap, cap / 2 + .ulpOfOne))
        return .nanoseconds(Int64(seconds * 1e9))
    }
}
