/// What FCM made of one device's message.
public enum FCMAnswer: Sendable, Equatable {
    /// Accepted: `projects/<project>/messages/<id>`.
    case accepted(name: String)
    /// Answered with one of FCM's error codes.
    case failed(FCMFailure)
    /// No answer (connection trouble past the retries, a timeout), or no access token.
    case unanswered(String)
}
