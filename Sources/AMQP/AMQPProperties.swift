import CopyOnWrite
import Foundation

/// The basic-class properties of a message. `nil` means the property is absent on the wire.
public struct AMQPProperties: Sendable, Hashable, CustomReflectable {
    /// The properties, held once however many hands hold them: a delivery's and a message's
    /// pass through several on their way, and each copy of a dozen optionals retained and
    /// released them all. Copied on a write while shared.
    private struct Fields: Sendable, Hashable {
        var contentType: String?
        var contentEncoding: String?
        var headers: AMQPTable?
        var persistent: Bool?
        var priority: UInt8?
        var correlationID: String?
        var replyTo: String?
        var expiration: String?
        var messageID: String?
        var timestamp: UInt64?
        var type: String?
        var userID: String?
        var appID: String?
    }

    private var fields: CopyOnWrite<Fields>

    /// Printed and reflected as its fields, as before they moved into the box.
    public var customMirror: Mirror { Mirror(reflecting: fields.value) }

    public var contentType: String? {
        _read { yield fields.value.contentType }
        _modify { yield &fields.value.contentType }
    }
    public var contentEncoding: String? {
        _read { yield fields.value.contentEncoding }
        _modify { yield &fields.value.contentEncoding }
    }
    public var headers: AMQPTable? {
        _read { yield fields.value.headers }
        _modify { yield &fields.value.headers }
    }
    /// `true` for delivery mode 2, so the broker writes the message to disk.
    public var persistent: Bool? {
        _read { yield fields.value.persistent }
        _modify { yield &fields.value.persistent }
    }
    public var priority: UInt8? {
        _read { yield fields.value.priority }
        _modify { yield &fields.value.priority }
    }
    public var correlationID: String? {
        _read { yield fields.value.correlationID }
        _modify { yield &fields.value.correlationID }
    }
    public var replyTo: String? {
        _read { yield fields.value.replyTo }
        _modify { yield &fields.value.replyTo }
    }
    /// Per-message TTL in milliseconds, as a decimal string (that is the wire format).
    public var expiration: String? {
        _read { yield fields.value.expiration }
        _modify { yield &fields.value.expiration }
    }
    public var messageID: String? {
        _read { yield fields.value.messageID }
        _modify { yield &fields.value.messageID }
    }
    /// Seconds since the Unix epoch.
    public var timestamp: UInt64? {
        _read { yield fields.value.timestamp }
        _modify { yield &fields.value.timestamp }
    }
    public var type: String? {
        _read { yield fields.value.type }
        _modify { yield &fields.value.type }
    }
    public var userID: String? {
        _read { yield fields.value.userID }
        _modify { yield &fields.value.userID }
    }
    public var appID: String? {
        _read { yield fields.value.appID }
        _modify { yield &fields.value.appID }
    }

    public init(
        contentType: String? = nil,
        contentEncoding: String? = nil,
        headers: AMQPTable? = nil,
        persistent: Bool? = nil,
        priority: UInt8? = nil,
        correlationID: String? = nil,
        replyTo: String? = nil,
        expiration: String? = nil,
        messageID: String? = nil,
        timestamp: UInt64? = nil,
        type: String? = nil,
        userID: String? = nil,
        appID: String? = nil
    ) {
        fields = CopyOnWrite(
            Fields(
                contentType: contentType, contentEncoding: contentEncoding, headers: headers, persistent: persistent, priority: priority,
                correlationID: correlationID, replyTo: replyTo, expiration: expiration, messageID: messageID, timestamp: timestamp,
                type: type, userID: userID, appID: appID))
    }
}
