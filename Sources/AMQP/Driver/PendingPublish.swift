/// A publish waiting for its confirm. A class because a basic.return marks it before the ack arrives.
final class PendingPublish {
    let message: AMQPMessage
    /// Called once with nil (confirmed) or the error; then dropped.
    private var completion: ((AMQPError?) -> Void)?
    /// Set when the broker returned this mandatory publish; the following ack then fails it.
    var returned: AMQPError?

    init(message: AMQPMessage, continuation: CheckedContinuation<Void, Error>) {
        self.message = message
        self.completion = { error in
            if let error { continuation.resume(throwing: error) } else { continuation.resume() }
        }
    }

    init(message: AMQPMessage, completion: @escaping (AMQPError?) -> Void) {
        self.message = message
        self.completion = completion
    }

    func succeed() {
        completion?(nil)
        completion = nil
    }

    func fail(_ error: AMQPError) {
        completion?(error)
        completion = nil
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
