import APNs

/// What one HTTP/2 exchange gave, whichever transport carried it.
package enum APNsExchangeOutcome: Sendable {
    /// `retryAfter`: the header FCM's 429 and 503 carry.
    case response(status: Int, apnsID: String?, apnsUniqueID: String?, requestID: String?, retryAfter: String? = nil, body: [UInt8])
    /// No answer. `retry`: the request may be sent again on a new connection (a refused stream,
    /// a GOAWAY, a dropped connection), within the client's transport retries.
    case failure(APNsClientError, retry: Bool)
}

/// One HTTP/2 connection of a client's pool, on either transport. Callers come from any task;
/// each transport drives its connection from a thread of its own.
package protocol APNsConnection: AnyObject, Sendable {
    /// Whether a socket to the server (or the proxy) is open now.
    var isOpen: Bool { get }
    /// Starts one POST per path of `batch`, connecting first when the connection is closed.
    /// Each answer goes to `round.complete(tag, …)` as it comes, from any thread, exactly once,
    /// also when the connection cannot take the batch.
    func start(_ batch: APNsExchangeBatch, round: APNsExchangeRound)
    /// Refuses new exchanges; those in flight finish, then the connection closes.
    func shutdown()
    /// HTTP/2 PINGs sent on this connection while quiet, and their answers.
    var keepalivePings: (sent: UInt64, answered: UInt64) { get }
}
