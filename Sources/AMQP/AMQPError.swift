/// An error from the AMQP layer, carrying librabbitmq's message and, when the broker closed the
/// channel or connection, the broker's reply code and text.
public struct AMQPError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// The URL or configuration is malformed; nothing was attempted.
        case invalidConfiguration
        /// TCP connect, name resolution or the AMQP handshake failed.
        case connectionFailed
        /// The broker refused the credentials or the vhost.
        case accessRefused
        /// The TLS handshake or certificate verification failed.
        case tls
        /// A connect, handshake or RPC did not finish within its timeout.
        case timeout
        /// The connection died while the operation was in flight; it is safe to try again.
        case connectionLost
        /// The broker closed the channel or connection (see `replyCode`, `replyText`).
        case brokerClosed
        /// The broker refused a publish (basic.nack).
        case nacked
        /// The broker returned a mandatory publish that no queue took.
        case returned
        /// The delivery came from a connection that has since been replaced; its tag means nothing
        /// on the new one, and the broker will redeliver the message.
        case staleDelivery
        /// The broker cancelled the consumer (queue deleted, for instance).
        case consumerCancelled
        /// The publisher or consumer was closed.
        case closed
        /// Anything else librabbitmq reported.
        case library
    }

    public let kind: Kind
    public let message: String
    public let replyCode: UInt16?
    public let replyText: String?
    /// A queue this connection had just declared was gone when it bound or consumed from it
    /// (reply 404): the broker removed it meanwhile, as it removes a quorum queue whose election
    /// failed after answering an earlier, abandoned declaration of it with declare-ok. Declaring
    /// it again makes it anew.
    public internal(set) var declaredQueueRemoved = false

    public init(_ kind: Kind, _ message: String, replyCode: UInt16? = nil, replyText: String? = nil) {
        self.kind = kind
        self.message = message
        self.replyCode = replyCode
        self.replyText = replyText
    }

    /// Whether publishing or acknowledging again, once reconnected, can succeed.
    public var isRetryable: Bool {
        switch kind {
        case .connectionLost, .timeout, .connectionFailed, .brokerClosed, .staleDelivery: true
        default: false
        }
    }

    /// The broker could not elect a leader for a quorum queue in time (reply 541,
    /// `cluster_not_formed`): a cluster short of a majority, or a node too busy to finish the
    /// election. The broker deletes the half-made queue; declaring it again can succeed.
    public var isClusterNotFormed: Bool {
        kind == .brokerClosed && replyCode == 541 && replyText?.contains("cluster_not_formed") == true
    }

    /// This error, marked as a 404 on a queue the connection had just declared.
    func declaredQueueWasRemoved() -> AMQPError {
        var marked = self
        marked.declaredQueueRemoved = true
        return marked
    }

    public var description: String {
        if let replyCode, let replyText {
            return "\(message) (broker reply \(replyCode): \(replyText))"
        }
        return message
    }
}
