/// The delivery tags of one connection not yet settled. The broker hands tags out in increasing
/// order, so "the oldest unsettled tag" is a cheap question, which is all ack coalescing needs.
struct UnsettledTags {
    private var tags: Set<UInt64> = []
    private var floor: UInt64 = 0

    mutating func insert(_ tag: UInt64) {
        if tags.isEmpty { floor = tag }
        tags.insert(tag)
    }

    mutating func remove(_ tag: UInt64) {
        tags.remove(tag)
    }

    mutating func remove(upTo tag: UInt64) {
        tags = tags.filter { $0 > tag }
    }

    /// Forgets what `settlement` of `tag` settles on the broker: a `multiple` ack or nack settles
    /// every delivery up to the tag, anything else the one delivery.
    mutating func settle(_ settlement: DriverCommand.Settlement, tag: UInt64) {
        switch settlement {
        case .ack(multiple: true), .nack(multiple: true, _): remove(upTo: tag)
        default: remove(tag)
        }
    }

    /// The oldest unsettled tag, or nil when everything handed out is settled.
    var lowest: UInt64? {
        mutating get {
            guard !tags.isEmpty else { return nil }
            while !tags.contains(floor) { floor += 1 }
            return floor
        }
    }
}
