import APNs

/// A misbehaviour to inject, so clients can be tested against everything APNs may do.
public struct MockAPNsFault: Sendable {
    public enum Action: Sendable {
        /// Answer this long after the request arrived.
        case latency(Duration)
        /// Answer a device request once the gate is open (after any latency).
        case held(MockAPNsGate)
        /// Answer with this reason and its status (429, 500, 503, TooManyProviderTokenUpdates…).
        case reject(APNsErrorReason)
        /// After a connection has answered this many requests, send GOAWAY and drain gracefully,
        /// as APNs and Go's net/http2 do: the GOAWAY names the highest stream the client opened,
        /// every stream up to it is answered, and the connection closes once the client closes
        /// it (or after a long grace, once every answer is written). Nothing is delivered twice.
        case goAway(afterRequests: Int)
        /// A server that dies on its feet: the connection's request number N+1 is delivered, but
        /// instead of its answer the client gets a GOAWAY and the connection is reset at once, so
        /// answers of delivered notifications are lost. An at-least-once client sends those again:
        /// their devices get the notification twice, and each still gets exactly one answer.
        case goAwayAbrupt(afterRequests: Int)
        /// When a connection receives its request number N+1, drop the connection without answering.
        case resetConnection(afterRequests: Int)
    }

    public var action: Action
    /// Only device requests to these tokens, and FCM messages naming them (never a broadcast or
    /// a management call); nil for all.
    public var tokens: Set<String>?
    /// Only broadcasts and channel management calls naming one of these channel ids in
    /// `apns-channel-id` (never a device request, nor a create or list, which name none); nil
    /// for all. A fault with both filters nil fires for every request of every kind.
    public var channels: Set<String>?
    /// How many times the fault fires; nil for always.
    public var times: Int?

    public init(_ action: Action, tokens: Set<String>? = nil, channels: Set<String>? = nil, times: Int? = nil) {
        self.action = action
        self.tokens = tokens
        self.channels = channels
        self.times = times
    }
}
