/// A device a job reaches, and the user it was reached through (nil for explicit tokens).
public struct Recipient: Sendable, Hashable {
    public var token: String
    public var user: String?

    public init(token: String, user: String? = nil) {
        self.token = token
        self.user = user
    }
}
