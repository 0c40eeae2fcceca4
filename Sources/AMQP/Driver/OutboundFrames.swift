import CRabbitMQ
import Foundation

/// Frames encoded here and written to the socket together, one `send` for a turn of the I/O loop.
///
/// librabbitmq writes each frame of a publish with a `send` of its own (method, header, body:
/// three system calls) and copies every string of the message into C memory first. On a worker
/// that publishes two confirmed messages per one-device job, those calls were the largest part
/// of the publishing thread's time in the kernel. Debian's librabbitmq 0.11 has no call that
/// writes several frames at once, so the frames of the common case are encoded here, in the
/// order the library would write them, and byte for byte as it would (a test compares the two).
///
/// What stays with the library: a body larger than one frame (it is written from the message
/// without a copy here), and every connection over TLS, whose socket only the library can write.
/// A value type; only `write(to:)` touches the socket.
struct OutboundFrames {
    private(set) var bytes: [UInt8] = []
    /// The most a frame's payload may hold (the connection's frame size less the frame's own 8
    /// bytes): a larger body is split, which only the library does here; a larger header is
    /// refused, as the broker would refuse it by closing the connection.
    let largestBody: Int

    /// Written before the buffer grows past this, so that a window of large messages never holds
    /// more than about this much besides them.
    static let flushThreshold = 256 * 1024

    init(frameMax: Int) {
        largestBody = frameMax - 8
    }

    var isEmpty: Bool { bytes.isEmpty }
    var count: Int { bytes.count }

    /// A message that cannot be encoded: a field longer than AMQP allows. Nothing of it is kept.
    struct EncodingError: Error {
        var message: String
    }

    /// Whether `append(publish:)` takes this body, or the library must write the message.
    func fits(_ message: AMQPMessage) -> Bool {
        message.body.count <= largestBody
    }

    /// Appends basic.publish, its content header and its body frame. On an error the buffer is
    /// as it was.
    mutating func append(publish message: AMQPMessage, channel: UInt16) throws(EncodingError) {
        precondition(fits(message), "a body larger than one frame goes through the library")
        let start = bytes.count
        do {
            try appendFrames(message, channel: channel, body: true)
        } catch {
            bytes.removeSubrange(start...)
            throw error
        }
    }

    /// Throws what `append(publish:)` would for this message's method and header, without
    /// keeping them: the library writes the method frame before it finds a bad header, which
    /// leaves the broker a publish without content, and it closes the channel.
    func check(_ message: AMQPMessage) throws(EncodingError) {
        var scratch = OutboundFrames(frameMax: largestBody + 8)
        try scratch.appendFrames(message, channel: 1, body: false)
    }

    private mutating func appendFrames(_ message: AMQPMessage, channel: UInt16, body: Bool) throws(EncodingError) {
        // basic.publish: ticket, exchange, routing key, then mandatory and immediate as bits.
        var frame = beginFrame(type: 1, channel: channel)
        appendUInt16(60)
        appendUInt16(40)
        appendUInt16(0)
        try appendShortString(message.exchange, field: "exchange")
        try appendShortString(message.routingKey, field: "routing key")
        bytes.append(message.mandatory ? 1 : 0)
        endFrame(&frame)

        // The content header: class, weight, body size, property flags, then the properties
        // present, in the order of their flags.
        frame = beginFrame(type: 2, channel: channel)
        appendUInt16(60)
        appendUInt16(0)
        appendUInt64(UInt64(message.body.count))
        let flagsAt = bytes.count
        appendUInt16(0)
        var flags: UInt16 = 0
        let p = message.properties
        func string(_ value: String?, _ flag: amqp_flags_t, _ field: String) throws(EncodingError) {
            guard let value else { return }
            flags |= UInt16(flag)
            try appendShortString(value, field: field)
        }
        try string(p.contentType, PW_FLAG_CONTENT_TYPE, "content_type")
        try string(p.contentEncoding, PW_FLAG_CONTENT_ENCODING, "content_encoding")
        if let headers = p.headers {
            flags |= UInt16(PW_FLAG_HEADERS)
            try appendTable(headers)
        }
        if let persistent = p.persistent {
            flags |= UInt16(PW_FLAG_DELIVERY_MODE)
            bytes.append(persistent ? 2 : 1)
        }
        if let priority = p.priority {
            flags |= UInt16(PW_FLAG_PRIORITY)
            bytes.append(priority)
        }
        try string(p.correlationID, PW_FLAG_CORRELATION_ID, "correlation_id")
        try string(p.replyTo, PW_FLAG_REPLY_TO, "reply_to")
        try string(p.expiration, PW_FLAG_EXPIRATION, "expiration")
        try string(p.messageID, PW_FLAG_MESSAGE_ID, "message_id")
        if let timestamp = p.timestamp {
            flags |= UInt16(PW_FLAG_TIMESTAMP)
            appendUInt64(timestamp)
        }
        try string(p.type, PW_FLAG_TYPE, "type")
        try string(p.userID, PW_FLAG_USER_ID, "user_id")
        try string(p.appID, PW_FLAG_APP_ID, "app_id")
        bytes[flagsAt] = UInt8(flags >> 8)
        bytes[flagsAt + 1] = UInt8(truncatingIfNeeded: flags)
        let headerSize = bytes.count - frame.sizeAt - 4
        guard headerSize <= largestBody else {
            throw EncodingError(message: "its properties and headers take \(headerSize) bytes; a frame of this connection holds at most \(largestBody)")
        }
        endFrame(&frame)

        // No body frame for an empty body, as the library does.
        guard body, !message.body.isEmpty else { return }
        frame = beginFrame(type: 3, channel: channel)
        bytes += message.body
        endFrame(&frame)
    }

    /// basic.ack, basic.nack or basic.reject.
    mutating func append(_ settlement: DriverCommand.Settlement, tag: UInt64, channel: UInt16) {
        var frame = beginFrame(type: 1, channel: channel)
        appendUInt16(60)
        switch settlement {
        case .ack(let multiple):
            appendUInt16(80)
            appendUInt64(tag)
            bytes.append(multiple ? 1 : 0)
        case .nack(let multiple, let requeue):
            appendUInt16(120)
            appendUInt64(tag)
            bytes.append((multiple ? 1 : 0) | (requeue ? 2 : 0))
        case .reject(let requeue):
            appendUInt16(90)
            appendUInt64(tag)
            bytes.append(requeue ? 1 : 0)
        }
        endFrame(&frame)
    }

    /// Writes the whole buffer and empties it, waiting while the socket is full: a broker under
    /// a resource alarm stops reading, and its publishers wait. Throws when the socket fails, or
    /// when for `stall` nothing could be written and nothing came from the broker either (its
    /// heartbeats stop only when it is gone without closing the connection: a host lost, a flow
    /// dropped on the way); nil waits for ever. What was written of the buffer is then unknown.
    mutating func write(to socket: Int32, stall: Duration?) throws(AMQPError) {
        defer {
            // Kept for the next turn, unless one large turn grew it.
            if bytes.capacity > 4 * Self.flushThreshold {
                bytes = []
            } else {
                bytes.removeAll(keepingCapacity: true)
            }
        }
        var offset = 0
        var lastSign = ContinuousClock.now
        // Read once the socket is first found full, not on every turn: a system call saved per write.
        var waiting: Int32?
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { buffer in
                send(socket, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if sent > 0 {
                offset += sent
                lastSign = .now
                continue
            }
            let error = errno
            if sent < 0 && error == EINTR { continue }
            guard sent < 0 && (error == EAGAIN || error == EWOULDBLOCK) else {
                throw AMQPError(.connectionLost, "writing to the broker: \(sent == 0 ? "nothing written" : String(cString: strerror(error)))")
            }
            if waiting == nil, stall != nil { waiting = Self.bytesWaiting(on: socket) }
            var writable = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&writable, 1, stall.map { Int32(clamping: Int(max($0 / .milliseconds(1) / 2, 1))) } ?? -1)
            if ready < 0 && errno != EINTR {
                throw AMQPError(.connectionLost, "waiting to write to the broker: \(String(cString: strerror(errno)))")
            }
            guard ready == 0, let stall else { continue }
            let now = Self.bytesWaiting(on: socket)
            if now != waiting {
                waiting = now
                lastSign = .now
            } else if ContinuousClock.now - lastSign >= stall {
                throw AMQPError(.connectionLost, "nothing could be written to the broker, and nothing came from it, for \(stall); it is gone, or the way to it")
            }
        }
    }

    /// The bytes received and not read yet: when they grow, the broker is still there.
    private static func bytesWaiting(on socket: Int32) -> Int32 {
        var count: Int32 = 0
        return ioctl(socket, UInt(FIONREAD), &count) == 0 ? count : -1
    }

    // MARK: - Encoding

    private struct OpenFrame {
        var sizeAt: Int
    }

    private mutating func beginFrame(type: UInt8, channel: UInt16) -> OpenFrame {
        bytes.append(type)
        appendUInt16(channel)
        let sizeAt = bytes.count
        appendUInt32(0)
        return OpenFrame(sizeAt: sizeAt)
    }

    private mutating func endFrame(_ frame: inout OpenFrame) {
        let size = UInt32(bytes.count - frame.sizeAt - 4)
        bytes[frame.sizeAt] = UInt8(size >> 24)
        bytes[frame.sizeAt + 1] = UInt8(truncatingIfNeeded: size >> 16)
        bytes[frame.sizeAt + 2] = UInt8(truncatingIfNeeded: size >> 8)
        bytes[frame.sizeAt + 3] = UInt8(truncatingIfNeeded: size)
        bytes.append(0xCE)
    }

    private mutating func appendUInt16(_ value: UInt16) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    private mutating func appendUInt32(_ value: UInt32) {
        appendUInt16(UInt16(value >> 16))
        appendUInt16(UInt16(truncatingIfNeeded: value))
    }

    private mutating func appendUInt64(_ value: UInt64) {
        appendUInt32(UInt32(value >> 32))
        appendUInt32(UInt32(truncatingIfNeeded: value))
    }

    private mutating func appendShortString(_ string: String, field: String) throws(EncodingError) {
        let count = string.utf8.count
        guard count <= 255 else {
            throw EncodingError(message: "its \(field) is \(count) bytes long; AMQP allows at most 255")
        }
        bytes.append(UInt8(count))
        bytes += string.utf8
    }

    /// A field table, encoded by the library from the C form `CArena` builds: tables are rare on
    /// this path (dead letters' headers), and the library's encoder knows every field type.
    private mutating func appendTable(_ table: AMQPTable) throws(EncodingError) {
        var capacity = 4096
        while true {
            // A table larger than a frame fails the header's own check anyway.
            capacity = min(capacity, largestBody + 4)
            let (status, encoded): (Int32, [UInt8]) = CArena.with { arena in
                var cTable = arena.table(table)
                var scratch = [UInt8](repeating: 0, count: capacity)
                var written = 0
                let status = scratch.withUnsafeMutableBytes { buffer in
                    amqp_encode_table(amqp_bytes_t(len: buffer.count, bytes: buffer.baseAddress), &cTable, &written)
                }
                return (status, status == AMQP_STATUS_OK.rawValue ? Array(scratch[..<written]) : [])
            }
            if status == AMQP_STATUS_OK.rawValue {
                bytes += encoded
                return
            }
            guard status == AMQP_STATUS_TABLE_TOO_BIG.rawValue, capacity < largestBody + 4 else {
                throw EncodingError(
                    message: status == AMQP_STATUS_TABLE_TOO_BIG.rawValue
                        ? "its headers take more than the \(largestBody) bytes a frame of this connection holds"
                        : "its headers cannot be encoded: \(AMQPStatus.text(status))")
            }
            capacity *= 4
        }
    }
}
