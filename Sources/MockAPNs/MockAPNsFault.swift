import APNs

/// A misbehaviour to inject, so clients can be tested against everything APNs may do.
public struct MockAPNsFault: Sendable {
    public enum Action: Sendable {
        /// Answer this long after the request arrived.
        case latency(Duration)
        /// Answer with this reason and its status (429, 500, 503, TooManyProviderTokenUpdates…).
        case reject(APNsErrorReason)
        /// After a connection has answered this many requests, send GOAWAY and close it.
        case goAway(afterRequests: Int)
        /// When a connection receives its request number N+1, drop the connection without answering.
        case resetConnection(afterRequests: Int)
    }

    public var action: Action
    /// Only requests to these tokens; nil for all.
    public var tokens: Set<String>?
    /// How many times the fault fires; nil for always.
    public var times: Int?

    public init(_ action: Action, tokens: Set<String>? = nil, times: Int? = nil) {
        self.action = action
        self.tokens = tokens
        self.times = times
    }
}
