import Foundation

/// Reads the documents a worker meets most, such as a one-device job, into the very tree
/// `JSONSerialization` makes of them (`String`, `NSNumber`, `NSNull`, `[Any]`, `[String: Any]`),
/// without Foundation's parser.
///
/// Why: on Linux, Foundation's parser makes each string through a generic `String(bytes:encoding:)`
/// that looks its metadata up in the runtime's cache every time, and builds a tree of its own
/// before the one it returns. For the 217-byte job of `bench.sh transactional` that was half of
/// `JobDecoder.decode` (`pushworker-bench decode`, docs/benchmarks.md).
///
/// It declines (returns nil) rather than decide anything Foundation might decide differently:
/// any error, a trailing comma (Foundation takes one), a number with a fraction or an exponent or
/// of more than 18 digits, a `\u` escape that is not a scalar or a surrogate pair, a string with
/// a byte-order mark (Foundation drops one from a string's text), a NUL byte (never JSON outside
/// a string; in the first bytes Foundation reads the document as UTF-16 or UTF-32), and nesting
/// deeper than 256. `JSONDocument.parse` then asks Foundation, so what it accepts, the
/// tree, and every error stay Foundation's; `JSONTreeReaderTests` compare the two.
struct JSONTreeReader {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0

    /// Deeper than Foundation's limit (512) would be its error; this stays well inside the stack.
    private static let maximumDepth = 256

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// The document's tree, or nil where Foundation is to read it.
    static func tree(_ document: some DataProtocol) -> Any? {
        let read = document.withContiguousStorageIfAvailable { buffer -> Any? in
            var reader = JSONTreeReader(buffer)
            return reader.document()
        }
        return read ?? nil
    }

    private mutating func document() -> Any? {
        guard let value = value() else { return nil }
        skipWhitespace()
        return index == bytes.count ? value : nil
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func value() -> Any? {
        skipWhitespace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "\""): return string()
        case UInt8(ascii: "{"): return object()
        case UInt8(ascii: "["): return array()
        case UInt8(ascii: "t"): return literal("true") ? NSNumber(value: true) : nil
        case UInt8(ascii: "f"): return literal("false") ? NSNumber(value: false) : nil
        case UInt8(ascii: "n"): return literal("null") ? NSNull() : nil
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return nil
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    private mutating func object() -> [String: Any]? {
        guard depth < Self.maximumDepth else { return nil }
        depth += 1
        defer { depth -= 1 }
        index += 1
        var object: [String: Any] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return object
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string() else { return nil }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            guard let member = value() else { return nil }
            // The last of a repeated key wins, as in Foundation.
            object[key] = member
            skipWhitespace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return object
            default: return nil
            }
        }
    }

    private mutating func array() -> [Any]? {
        guard depth < Self.maximumDepth else { return nil }
        depth += 1
        defer { depth -= 1 }
        index += 1
        var array: [Any] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return array
        }
        while true {
            guard let element = value() else { return nil }
            array.append(element)
            skipWhitespace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return array
            default: return nil
            }
        }
    }

    /// An integer of up to 18 digits, as Foundation makes it: `UInt64` when not negative, else `Int64`.
    private mutating func number() -> NSNumber? {
        let negative = bytes[index] == UInt8(ascii: "-")
        var position = negative ? index + 1 : index
        let firstDigit = position
        var magnitude: UInt64 = 0
        while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
            magnitude = magnitude &* 10 &+ UInt64(bytes[position] &- UInt8(ascii: "0"))
            position += 1
        }
        let digits = position - firstDigit
        guard digits > 0, digits <= 18, digits == 1 || bytes[firstDigit] != UInt8(ascii: "0") else { return nil }
        if position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "}"): break
            default: return nil
            }
        }
        index = position
        return negative ? NSNumber(value: -Int64(magnitude)) : NSNumber(value: magnitude)
    }

    private mutating func string() -> String? {
        index += 1
        let start = index
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return ascii ? String(decoding: text, as: UTF8.self) : Self.validated(text)
            }
            if byte == UInt8(ascii: "\\") { return escapedString(from: start) }
            if byte < 0x20 { return nil }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        return nil
    }

    /// Valid UTF-8 without a byte-order mark (Foundation's reading of a string's bytes may drop one).
    private static func validated(_ text: UnsafeBufferPointer<UInt8>) -> String? {
        guard let string = String(validating: text, as: UTF8.self), !string.unicodeScalars.contains("\u{FEFF}") else { return nil }
        return string
    }

    /// The rest of a string that has an escape, from its first byte; `index` is at the escape.
    private mutating func escapedString(from start: Int) -> String? {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(index - start + 16)
        decoded.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return decoded.withUnsafeBufferPointer { Self.validated($0) }
            case UInt8(ascii: "\\"):
                guard index + 1 < bytes.count else { return nil }
                let escaped = bytes[index + 1]
                index += 2
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escaped)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return nil }
                    decoded.append(contentsOf: UTF8.encode(scalar)!)
                default: return nil
                }
            default:
                if byte < 0x20 { return nil }
                decoded.append(byte)
                index += 1
            }
        }
        return nil
    }

    /// After `\u`: four hex digits, a scalar or the high half of a pair whose low half follows.
    private mutating func unicodeEscape() -> Unicode.Scalar? {
        guard let unit = hexUnit() else { return nil }
        switch unit {
        case 0xD800...0xDBFF:
            guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
            index += 2
            guard let low = hexUnit(), (0xDC00...0xDFFF).contains(low) else { return nil }
            return Unicode.Scalar(0x10000 + (UInt32(unit) - 0xD800) * 0x400 + (UInt32(low) - 0xDC00))
        case 0xDC00...0xDFFF:
            return nil
        default:
            return Unicode.Scalar(unit)
        }
    }

    private mutating func hexUnit() -> UInt16? {
        guard bytes.count - index >= 4 else { return nil }
        var unit: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let nibble: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            unit = unit << 4 | UInt16(nibble)
            index += 1
        }
        return unit
    }
}
