import Foundation

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

    /// Foundation reports "… around character N." (a 0-based byte offset) or "Unexpected end of
    /// file…" (no offset: the end of the data).
    static func located(_ error: Error, in data: Data) -> JSONSyntaxError {
        let raw = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? "\(error)"
        var reason = raw
        var offset = data.count
        if let range = raw.range(of: " around character ") {
            let digits = raw[range.upperBound...].prefix { $0.isNumber }
            if let parsed = Int(digits) { offset = min(parsed, data.count) }
            reason = String(raw[..<range.lowerBound])
        }
        if reason.hasSuffix(".") { reason.removeLast() }
        if data.isEmpty { reason = "the document is empty" }
        let before = data.prefix(offset)
        let line = before.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        let lineStart = before.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? before.startIndex
        let column = String(decoding: before[lineStart...], as: UTF8.self).count + 1
        return JSONSyntaxError(line: line, column: column, reason: reason)
    }
}
