/// A publish waiting for its confirm. A class because a basic.return marks it before the ack arrives.
final class PendingPublish {
    let message: AMQPMessage
    private var continuation: CheckedContinuation<Void, Error>?
    /// Set when the broker returned this mandatory publish; the following ack then fails it.
    var returned: AMQPError?

    init(message: AMQPMessage, continuation: CheckedContinuation<Void, Error>) {
        self.message = message
        self.continuation = continuation
    }

    func succeed() {
        continuation?.resume()
        continuation = nil
    }

    func fail(_ error: AMQPError) {
        continuation?.resume(throwing: error)
        continuation = nil
    }

    /// Resolves the publish for the broker's verdict.
    func confirm(acknowledged: Bool) {
        if !acknowledged {
            fail(AMQPError(.nacked, "the broker refused to take responsibility for the message (basic.nack) on exchange '\(message.exchange)' with routing key '\(message.routingKey)'"))
        } else if let returned {
            fail(returned)
        } else {
            succeed()
        }
    }
}
