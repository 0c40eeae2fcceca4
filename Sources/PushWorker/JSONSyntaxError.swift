import Foundation
import JSONStream

/// Why a document is not JSON, and where: producers in any language get told the line and
/// column to look at, not just "invalid JSON".
public struct JSONSyntaxError: Error, Sendable, CustomStringConvertible, Equatable {
    /// 1-based line of the offending byte.
    public let line: Int
    /// 1-based column, counted in characters.
    public let column: Int
    /// The parser's own words, without its byte offset.
    public let reason: String

    public var description: String {
        "not valid JSON at line \(line), column \(column): \(reason)"
    }

    /// Parses `data` with Foundation's JSON parser, turning its failure into a located error.
    /// Returns the parsed object so callers do not parse twice.
    @discardableResult
    public static func check(_ data: Data) throws(JSONSyntaxError) -> Any {
        do {
            return try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw located(error, in: data)
        }
    }

    /// Foundation says that a document is not JSON but says where only in its debug text, whose
    /// wording is no API. YAJL (the parser of streamed bodies) says where as a byte offset, so a
    /// refused document is read again by it, on the error path only: whole documents are parsed by
    /// Foundation (the fastest parser here, and it gives the tree the decoders check field by
    /// field), and bodies too large to hold by YAJL, so both report errors the same way.
    static func located(_ error: Error, in data: Data) -> JSONSyntaxError {
        let parser = JSONStreamParser(handler: IgnoringHandler())
        var offset = data.count
        var reason = "not valid JSON"
        do {
            try parser.parse(Array(data))
            try parser.finish()
            // YAJL took what Foundation refused (a rule only Foundation has): no place to name.
            reason = (error as NSError).localizedDescription
        } catch {
            offset = tokenStart(at: min(error.offset, data.count), in: data)
            reason = error.message
        }
        if data.isEmpty { reason = "the document is empty" }
        let before = data.prefix(offset)
        let line = before.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        let lineStart = before.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? before.startIndex
        let column = String(decoding: before[lineStart...], as: UTF8.self).count + 1
        return JSONSyntaxError(line: line, column: column, reason: reason)
    }

    /// YAJL's offset falls somewhere in or just before the token it could not place (the
    /// whitespace it looked past, a letter inside an unexpected string or number); a reader looks
    /// for where that token starts, as Foundation's offsets said.
    private static func tokenStart(at offset: Int, in data: Data) -> Int {
        let bytes = Array(data)
        func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        func isLiteral(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+")
                || byte == UInt8(ascii: ".") || byte >= 0x80
        }
        var start = offset
        while start < bytes.count, isWhitespace(bytes[start]) { start += 1 }
        guard start < bytes.count else { return min(offset, bytes.count) }
        // A string's closing quote: back into the string.
        if bytes[start] == UInt8(ascii: "\""), start > 0, isLiteral(bytes[start - 1]) { start -= 1 }
        guard isLiteral(bytes[start]) else { return start }
        while start > 0, isLiteral(bytes[start - 1]) { start -= 1 }
        if start > 0, bytes[start - 1] == UInt8(ascii: "\"") { start -= 1 }
        return start
    }

    /// Takes every event and keeps none: only the syntax is wanted.
    private final class IgnoringHandler: JSONEventHandler {
        func handle(_ event: JSONEvent) -> Bool { true }
    }
}
