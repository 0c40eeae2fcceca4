import Foundation

/// Reads of the values `JSONSerialization` gives (`NSNull`, `NSNumber`, `String`, arrays and
/// dictionaries) without the runtime's bridging: on Linux, `value is NSNull` or
/// `value as? NSNumber` on a string, an array or a dictionary bridges it to its Foundation class
/// (copying a dictionary whole) before the check fails, about 0.8 µs a check. A job's fields are
/// read with these, a job at a time, so each check costs a type comparison instead.
public enum JSONValue {
    /// JSON `null`.
    @inline(__always)
    public static func isNull(_ value: Any) -> Bool {
        type(of: value) == NSNull.self
    }

    /// A number or a boolean (JSONSerialization reads both as `NSNumber`; `isBoolean` tells
    /// them apart); nil for anything else. A number built in Swift (`Int`, `Double`, `Bool`)
    /// still reads, through the runtime's cast.
    @inline(__always)
    public static func number(_ value: Any) -> NSNumber? {
        if type(of: value) is NSNumber.Type { return value as? NSNumber }
        if value is String || value is [String: Any] || value is [Any] || isNull(value) { return nil }
        return value as? NSNumber
    }

    /// `true` or `false`: JSONSerialization reads them as `NSNumber` of type encoding "c", and
    /// never makes an 8-bit integer, the only other "c".
    @inline(__always)
    public static func isBoolean(_ number: NSNumber) -> Bool {
        let type = number.objCType
        return type[0] == CChar(UInt8(ascii: "c")) && type[1] == 0
    }
}
