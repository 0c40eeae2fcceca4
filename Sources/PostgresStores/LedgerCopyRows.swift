import NIOCore
import Stores

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
        // Read in place: iterating by value would copy (retain and release) each record's dozen strings.
        records.withUnsafeBufferPointer { records in
            for index in records.indices {
                text(records[index].jobID, &bytes); bytes.append(tab)
                text(records[index].app, &bytes); bytes.append(tab)
                text(records[index].token, &bytes); bytes.append(tab)
                text(records[index].chunk, &bytes); bytes.append(tab)
                text(records[index].user, &bytes); bytes.append(tab)
                text(records[index].outcome, &bytes); bytes.append(tab)
                number(records[index].status.map(Int64.init), &bytes); bytes.append(tab)
                text(records[index].reason, &bytes); bytes.append(tab)
                text(records[index].serviceMessageID, &bytes); bytes.append(tab)
                text(records[index].apnsUniqueID, &bytes); bytes.append(tab)
                number(Int64(records[index].attempts), &bytes); bytes.append(tab)
                number(records[index].at, &bytes); bytes.append(tab)
                number(DeliveryRecord.day(ofMilliseconds: records[index].at), &bytes); bytes.append(tab)
                text(records[index].channel, &bytes); bytes.append(tab)
                text(records[index].requestID, &bytes); bytes.append(tab)
                number(records[index].timestamp, &bytes); bytes.append(tab)
                number(records[index].resultsMessage, &bytes)
                bytes.append(UInt8(ascii: "\n"))
            }
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
        var width = 1
        var probe = rest / 10
        while probe > 0 {
            width += 1
            probe /= 10
        }
        let end = bytes.count + width
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: width))
        bytes.withUnsafeMutableBufferPointer { digits in
            var at = end
            repeat {
                at -= 1
                digits[at] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
        }
    }

    private static func text(_ optional: String?, _ bytes: inout [UInt8]) {
        guard let value = optional else {
            bytes.append(contentsOf: null)
            return
        }
        // Native strings (all of a record's) are read in place; another is copied once first.
        if value.utf8.withContiguousStorageIfAvailable({ append($0, &bytes) }) == nil {
            let copy = Array(value.utf8)
            copy.withUnsafeBufferPointer { append($0, &bytes) }
        }
    }

    private static func append(_ utf8: UnsafeBufferPointer<UInt8>, _ bytes: inout [UInt8]) {
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
