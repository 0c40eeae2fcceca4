/// Takes a message body piece by piece as its frames arrive, so a body too large to hold in
/// memory (a million-token job) is never held whole.
///
/// Called on the connection's I/O thread, one fragment at a time and in order, before the
/// delivery is handed to the consumer; after that only the consumer touches it. It must not
/// block: heartbeats and every other delivery of the connection wait meanwhile.
public protocol AMQPBodyReceiver: AnyObject, Sendable {
    /// The next fragment; the bytes are valid only during the call.
    func receive(_ fragment: RawSpan)
}

/// Which bodies a consumer streams to a receiver instead of collecting into `body`.
public struct AMQPBodyStreaming: Sendable {
    /// Bodies of more bytes than this are streamed.
    public var threshold: Int
    /// Makes the receiver of one body, from its properties and size.
    public var makeReceiver: @Sendable (_ properties: AMQPProperties, _ size: Int) -> any AMQPBodyReceiver

    public init(threshold: Int, makeReceiver: @escaping @Sendable (_ properties: AMQPProperties, _ size: Int) -> any AMQPBodyReceiver) {
        self.threshold = threshold
        self.makeReceiver = makeReceiver
    }
}
