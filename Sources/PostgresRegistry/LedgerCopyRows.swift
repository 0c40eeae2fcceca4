import NIOCore
import Registry

/// Delivery records as the rows of a `COPY … FROM STDIN` in text format, in the order of
/// `copyColumns`: tab between fields, a newline after each row, `\N` for null, and the four
/// characters that format gives a meaning (backslash, tab, newline, carriage return) escaped.
enum LedgerCopyRows {
    static func buffer(_ records: [DeliveryRecord]) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: records.count * 220)
        for record in records {
            text(record.jobID, &buffer); tab(&buffer)
            text(record.app, &buffer); tab(&buffer)
            text(record.token, &buffer); tab(&buffer)
            text(record.chunk, &buffer); tab(&buffer)
            text(record.user, &buffer); tab(&buffer)
            text(record.outcome, &buffer); tab(&buffer)
            text(record.status.map(String.init), &buffer); tab(&buffer)
            text(record.reason, &buffer); tab(&buffer)
            text(record.apnsID, &buffer); tab(&buffer)
            text(record.apnsUniqueID, &buffer); tab(&buffer)
            text(String(record.attempts), &buffer); tab(&buffer)
            text(String(record.at), &buffer); tab(&buffer)
            text(String(DeliveryRecord.day(ofMilliseconds: record.at)), &buffer); tab(&buffer)
            text(record.channel, &buffer); tab(&buffer)
            text(record.requestID, &buffer)
            buffer.writeInteger(UInt8(ascii: "\n"))
        }
        return buffer
    }

    private static func tab(_ buffer: inout ByteBuffer) { buffer.writeInteger(UInt8(ascii: "\t")) }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte == 0x5C || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func text(_ optional: String?, _ buffer: inout ByteBuffer) {
        guard var value = optional else {
            buffer.writeStaticString("\\N")
            return
        }
        value.withUTF8 { bytes in
            // Most values (tokens, ids, outcomes) need no escape: copy them whole.
            guard bytes.contains(where: needsEscape) else {
                buffer.writeBytes(bytes)
                return
            }
            for byte in bytes {
                switch byte {
                case 0x5C: buffer.writeStaticString("\\\\")
                case 0x09: buffer.writeStaticString("\\t")
                case 0x0A: buffer.writeStaticString("\\n")
                case 0x0D: buffer.writeStaticString("\\r")
                default: buffer.writeInteger(byte)
                }
            }
        }
    }
}
