import NIOCore
import Registry

/// Delivery records as the rows of a `COPY … FROM STDIN` in text format, in the order of
/// `copyColumns`: tab between fields, a newline after each row, `\N` for null, and the four
/// characters that format gives a meaning (backslash, tab, newline, carriage return) escaped.
///
/// Built into one byte array and handed over whole: the worker formats every record it ledgers
/// here, so numbers are written as digits in place rather than through a `String` each.
enum LedgerCopyRows {
    static func buffer(_ records: [DeliveryRecord]) -> ByteBuffer {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(records.count * 300)
        for record in records {
            text(record.jobID, &bytes); bytes.append(tab)
            text(record.app, &bytes); bytes.append(tab)
            text(record.token, &bytes); bytes.append(tab)
            text(record.chunk, &bytes); bytes.append(tab)
            text(record.user, &bytes); bytes.append(tab)
            text(record.outcome, &bytes); bytes.append(tab)
            number(record.status.map(Int64.init), &bytes); bytes.append(tab)
            text(record.reason, &bytes); bytes.append(tab)
            text(record.apnsID, &bytes); bytes.append(tab)
            text(record.apnsUniqueID, &bytes); bytes.append(tab)
            number(Int64(record.attempts), &bytes); bytes.append(tab)
            number(record.at, &bytes); bytes.append(tab)
            number(DeliveryRecord.day(ofMilliseconds: record.at), &bytes); bytes.append(tab)
            text(record.channel, &bytes); bytes.append(tab)
            text(record.requestID, &bytes)
            bytes.append(UInt8(ascii: "\n"))
        }
        return ByteBuffer(bytes: bytes)
    }

    private static let tab = UInt8(ascii: "\t")
    private static let null: [UInt8] = Array("\\N".utf8)

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte == 0x5C || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func number(_ optional: Int64?, _ bytes: inout [UInt8]) {
        guard let value = optional else {
            bytes.append(contentsOf: null)
            return
        }
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var rest = value.magnitude
        let start = bytes.count
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        bytes[start...].reverse()
    }

    private static func text(_ optional: String?, _ bytes: inout [UInt8]) {
        guard var value = optional else {
            bytes.append(contentsOf: null)
            return
        }
        value.withUTF8 { utf8 in
            // Most values (tokens, ids, outcomes) need no escape: copy them whole.
            guard utf8.contains(where: needsEscape) else {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
                case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                default: bytes.append(byte)
                }
            }
        }
    }
}
