import Stores

/// A device a job reaches, and the user it was reached through (nil for explicit tokens).
public struct Recipient: Sendable, Hashable {
    public var token: String
    public var user: String?
    /// Sends already made to this device by earlier rounds (a retry job).
    public var previousAttempts: Int
    /// The badge count an earlier round of a counting job gave this device: sent again as it is,
    /// not counted again.
    public var badge: Int?
    /// The service it is reached through.
    public var platform: DevicePlatform
    /// Handed on to a retry job: how long the service asked not to be sent to again (FCM's
    /// `Retry-After`), so the retry job goes to a round that pauses at least that long.
    public var notBefore: Duration?

    public init(token: String, user: String? = nil, previousAttempts: Int = 0, badge: Int? = nil, platform: DevicePlatform = .apns) {
        self.token = token
        self.platform = platform
        self.user = user
        self.previousAttempts = previousAttempts
        self.badge = badge
    }
}
