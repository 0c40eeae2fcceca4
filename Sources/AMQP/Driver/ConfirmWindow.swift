/// The publishes of one connection written to the broker and not yet confirmed, keyed by the
/// delivery tag the broker will confirm them with.
///
/// Publisher confirms carry no message identity, only a tag the broker counts per channel from 1
/// in the order publishes arrive; so the window must number the publishes exactly as the broker
/// does, which is why a tag is taken only once a publish is on its way in order (written, or
/// buffered for the turn's one write: a write that fails loses the connection, and the window with
/// it), and why the numbering starts over with the window on a new connection. A confirm may cover one tag or (`multiple`)
/// every tag up to it, and confirms of single tags may arrive in any order (a quorum queue
/// confirms as its replicas commit). A basic.return comes before the confirm of the same publish
/// and names no tag at all: it is remembered on the publish, which the confirm then fails.
///
/// A value type with no I/O so that these rules can be tested without a broker; resolving a
/// publish only resumes its waiter.
struct ConfirmWindow {
    /// A dictionary, not an array indexed from the lowest tag: single confirms come out of order,
    /// and removing from the middle must not shift the rest.
    private var pending: [UInt64: PendingPublish] = [:]
    /// The tag the broker will give the next publish written on this connection.
    private(set) var nextDeliveryTag: UInt64 = 1
    /// Every tag below this one is resolved: where a `multiple` confirm's sweep and the search for
    /// a returned publish start, so neither walks the whole history of the connection.
    private(set) var lowestUnconfirmed: UInt64 = 1
    /// When the broker began nacking every publish of this connection (nil after any ack). A
    /// streak that lasts is a channel the broker will not recover (see `ConnectionDriver`).
    private(set) var nackedSince: ContinuousClock.Instant?

    /// Publishes written and waiting for their confirm: what the configured window bounds.
    var count: Int { pending.count }

    var isEmpty: Bool { pending.isEmpty }

    /// Takes a publish the broker has just been sent; returns the tag its confirm will carry.
    @discardableResult
    mutating func append(_ publish: PendingPublish) -> UInt64 {
        let tag = nextDeliveryTag
        pending[tag] = publish
        nextDeliveryTag += 1
        return tag
    }

    /// Resolves the publishes a basic.ack (`acknowledged`) or basic.nack covers. A tag already
    /// resolved, or never handed out, is ignored: the broker confirms each tag once, so such a
    /// confirm can only be about a publish failed already.
    mutating func confirm(
        upTo tag: UInt64, multiple: Bool, acknowledged: Bool, now: @autoclosure () -> ContinuousClock.Instant = .now
    ) {
        if acknowledged {
            nackedSince = nil
        } else if nackedSince == nil {
            nackedSince = now()
        }
        if multiple {
            var current = lowestUnconfirmed
            while current <= tag {
                pending.removeValue(forKey: current)?.confirm(acknowledged: acknowledged)
                current += 1
            }
        } else {
            pending.removeValue(forKey: tag)?.confirm(acknowledged: acknowledged)
        }
        while lowestUnconfirmed < nextDeliveryTag && pending[lowestUnconfirmed] == nil {
            lowestUnconfirmed += 1
        }
    }

    /// Marks the publish a basic.return is about, so that its confirm (which follows) fails with
    /// `error`. The broker routes a channel's publishes in order, so that is the oldest
    /// unconfirmed mandatory publish with the same exchange, routing key and message id that is
    /// not marked already. Returns false when none matches.
    mutating func markReturned(exchange: String, routingKey: String, messageID: String?, as error: @autoclosure () -> AMQPError) -> Bool {
        var tag = lowestUnconfirmed
        while tag < nextDeliveryTag {
            if let publish = pending[tag], publish.message.mandatory, publish.returned == nil,
                publish.message.exchange == exchange, publish.message.routingKey == routingKey,
                publish.message.properties.messageID == messageID
            {
                publish.returned = error()
                return true
            }
            tag += 1
        }
        return false
    }

    /// Whether the current nack streak has lasted longer than `limit`; if so the streak is
    /// forgotten, so it is reported once.
    mutating func nackStreakExceeds(_ limit: Duration, now: @autoclosure () -> ContinuousClock.Instant = .now) -> Bool {
        guard let nackedSince, now() - nackedSince > limit else { return false }
        self.nackedSince = nil
        return true
    }

    /// The connection is gone, and with it any confirm still owed: every publish waiting for one
    /// fails with `error` (in the order they were published), and the window starts over for the
    /// next connection, whose broker channel counts its tags from 1 again.
    mutating func reset(failing error: AMQPError) {
        let unresolved = pending.sorted { $0.key < $1.key }
        pending.removeAll()
        nextDeliveryTag = 1
        lowestUnconfirmed = 1
        nackedSince = nil
        for (_, publish) in unresolved { publish.fail(error) }
    }
}
