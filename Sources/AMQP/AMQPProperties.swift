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

    private final class Box: @unchecked Sendable {
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    /// The box, this value's own before a write.
    private mutating func unique() -> Box {
        if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
        return box
    }

    public static func == (lhs: AMQPProperties, rhs: AMQPProperties) -> Bool {
        lhs.box === rhs.box || lhs.box.fields == rhs.box.fields
    }

    public func hash(into hasher: inout Hasher) {
        box.fields.hash(into: &hasher)
    }

    /// Printed and reflected as its fields, as before they moved into the box.
    public var customMirror: Mirror { Mirror(reflecting: box.fields) }

    public var contentType: String? {
        _read { yield box.fields.contentType }
        _modify { yield &unique().fields.contentType }
    }
    public var contentEncoding: String? {
        _read { yield box.fields.contentEncoding }
        _modify { yield &unique().fields.contentEncoding }
    }
    public var headers: AMQPTable? {
        _read { yield box.fields.headers }
        _modify { yield &unique().fields.headers }
    }
    /// `true` for delivery mode 2, so the broker writes the message to disk.
    public var persistent: Bool? {
        _read { yield box.fields.persistent }
        _modify { yield &unique().fields.persistent }
    }
    public var priority: UInt8? {
        _read { yield box.fields.priority }
        _modify { yield &unique().fields.priority }
    }
    public var correlationID: String? {
        _read { yield box.fields.correlationID }
        _modify { yield &unique().fields.correlationID }
    }
    public var replyTo: String? {
        _read { yield box.fields.replyTo }
        _modify { yield &unique().fields.replyTo }
    }
    /// Per-message TTL in milliseconds, as a decimal string (that is the wire format).
    public var expiration: String? {
        _read { yield box.fields.expiration }
        _modify { yield &unique().fields.expiration }
    }
    public var messageID: String? {
        _read { yield box.fields.messageID }
        _modify { yield &unique().fields.messageID }
    }
    /// Seconds since the Unix epoch.
    public var timestamp: UInt64? {
        _read { yield box.fields.timestamp }
        _modify { yield &unique().fields.timestamp }
    }
    public var type: String? {
        _read { yield box.fields.type }
        _modify { yield &unique().fields.type }
    }
    public var userID: String? {
        _read { yield box.fields.userID }
        _modify { yield &unique().fields.userID }
    }
    public var appID: String? {
        _read { yield box.fields.appID }
        _modify { yield &unique().fields.appID }
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
        box = Box(
            Fields(
                contentType: contentType, contentEncoding: contentEncoding, headers: headers, persistent: persistent, priority: priority,
                correlationID: correlationID, replyTo: replyTo, expiration: expiration, messageID: messageID, timestamp: timestamp,
                type: type, userID: userID, appID: appID))
    }
}
