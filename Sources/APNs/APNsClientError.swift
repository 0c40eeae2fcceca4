/// Why a notification got no answer from APNs. An answer, even a rejection, is an ``APNsResponse``.
public enum APNsClientError: Error, Sendable, CustomStringConvertible {
    /// The request breaks an APNs rule; it was not sent.
    case invalidRequest(APNsValidationError)
    /// The credentials cannot be used (key, certificate, password).
    case credentials(String)
    /// No answer within the request timeout.
    case timeout(String)
    /// Connecting, TLS or the HTTP/2 exchange failed, after the transport retries.
    case transport(String)
    /// The client was shut down.
    case shutdown

    public var description: String {
        switch self {
        case .invalidRequest(let error): "invalid request: \(error)"
        case .credentials(let message): "unusable credentials: \(message)"
        case .timeout(let message): "timed out: \(message)"
        case .transport(let message): "transport error: \(message)"
        case .shutdown: "the APNs client has been shut down"
        }
    }

    /// The case's name, for a metric's label (the messages vary too much to be one).
    public var kind: String {
        switch self {
        case .invalidRequest: "invalid_request"
        case .credentials: "credentials"
        case .timeout: "timeout"
        case .transport: "transport"
        case .shutdown: "shutdown"
        }
    }

    /// Whether sending again later may succeed.
    public var isRetryable: Bool {
        switch self {
        case .timeout, .transport: true
        default: false
        }
    }
}
