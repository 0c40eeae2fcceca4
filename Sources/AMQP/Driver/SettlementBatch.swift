/// The plain acks of one batch of driver commands, to be sent as few frames as possible.
///
/// Each ack the broker receives costs it work (a quorum queue logs every settlement), and a
/// worker acks many deliveries between two turns of the I/O loop. One `multiple` ack settles
/// every delivery up to its tag, but it would also settle deliveries still being worked on; so
/// it may only reach up to the oldest delivery still unsettled once this batch's acks are
/// counted, and an ack above that goes out on its own. Gathering first and deciding once per
/// batch is what lets acks that arrive out of order still collapse into one frame.
///
/// A value type with no I/O; the frames go out through the closure `send(settling:_:)` is given.
struct SettlementBatch {
    /// Tags in the order their acks were handed over (an array, as the driver always had: one
    /// allocation per batch that has acks, none per ack once it has grown).
    private var tags: [UInt64] = []

    var isEmpty: Bool { tags.isEmpty }

    mutating func add(_ tag: UInt64) {
        tags.append(tag)
    }

    /// Removes the batch's tags from `unsettled` and sends the acks that settle them: first each
    /// ack that cannot be covered, in the order they came, then one `multiple` ack for the rest.
    /// `send` gets a tag and whether the ack is `multiple`; if it throws, the rest is not sent.
    func send(settling unsettled: inout UnsettledTags, _ send: (_ tag: UInt64, _ multiple: Bool) throws -> Void) rethrows {
        guard !tags.isEmpty else { return }
        for tag in tags { unsettled.remove(tag) }
        let settledBelow = unsettled.lowest ?? UInt64.max
        var coveredUpTo: UInt64 = 0
        for tag in tags {
            if tag < settledBelow {
                coveredUpTo = max(coveredUpTo, tag)
            } else {
                try send(tag, false)
            }
        }
        if coveredUpTo > 0 {
            try send(coveredUpTo, true)
        }
    }
}
