/// How often and how patiently a device is retried after 429, 5xx, timeouts and transport errors.
public struct RetryPolicy: Sendable, Hashable {
    /// Sends per device in all, the first included, before its outcome is `failed`.
    public var maxAttempts: Int
    /// Of those, how many one worker makes before handing the device on as a retry job through a
    /// delayed retry queue (so a long backoff does not hold a job, or a worker, hostage).
    public var inProcessAttempts: Int
    public var initialDelay: Duration
    public var maximumDelay: Duration

    public init(maxAttempts: Int = 3, inProcessAttempts: Int? = nil, initialDelay: Duration = .milliseconds(200), maximumDelay: Duration = .seconds(5)) {
        self.maxAttempts = maxAttempts
        self.inProcessAttempts = inProcessAttempts ?? maxAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// Exponential with full jitter: a random point in [cap/2, cap] for `attempt` (1 after the first send).
    public func delay(afterAttempt attempt: Int) -> Duration {
        var cap = initialDelay
        for _ in 1..<max(attempt, 1) where cap < maximumDelay { cap = cap * 2 }
        cap = min(cap, maximumDelay)
        let nanoseconds = cap / .nanoseconds(1)
        return .nanoseconds(Int64(Double.random(in: (nanoseconds / 2)...max(nanoseconds, 1))))
    }
}
