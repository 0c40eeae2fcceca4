import AMQP

extension AMQPProperties {
    /// The properties of a job the worker publishes from one it took: a chunk of a split job, a
    /// retry job, a chunk moved to the bulk lane. The producer's properties and headers (its
    /// reply queue, message id, its own headers) and ours come along; the broker's bookkeeping of
    /// the old message's past (dead-lettering, quorum delivery count) does not, because on the
    /// new message it would only mislead. Always persistent. `headers` sets what the new job says
    /// of itself.
    func republished(messageID: String? = nil, headers change: (inout AMQPTable) -> Void) -> AMQPProperties {
        var properties = self
        var headers = (self.headers ?? [:]).filter { !WireHeader.brokerBookkeeping.contains($0.key) }
        change(&headers)
        properties.headers = headers
        properties.persistent = true
        if let messageID { properties.messageID = messageID }
        return properties
    }
}
