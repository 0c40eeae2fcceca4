import Foundation

/// A value in an AMQP field table (message headers, queue and exchange arguments).
///
/// The cases follow the wire types librabbitmq and RabbitMQ agree on, so a table read from the
/// broker (such as `x-death`) and written back (a replayed dead letter) keeps every value's type.
public enum AMQPFieldValue: Sendable, Hashable {
    case bool(Bool)
    case int8(Int8)
    case uint8(UInt8)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case float(Float)
    case double(Double)
    /// An AMQP decimal: `value` scaled down by 10^`decimals`.
    case decimal(decimals: UInt8, value: UInt32)
    /// A long string that is valid UTF-8.
    case string(String)
    /// A long string that is not UTF-8, or an explicit byte array.
    case bytes([UInt8])
    /// Seconds since the Unix epoch, as AMQP timestamps are.
    case timestamp(UInt64)
    case table(AMQPTable)
    case array([AMQPFieldValue])
    case void
}

/// An AMQP field table. Keys are unique on the wire, so a dictionary loses nothing.
public typealias AMQPTable = [String: AMQPFieldValue]

extension AMQPFieldValue {
    /// The value as a string, when it is a UTF-8 long string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The value as an integer, whatever its integer width on the wire.
    public var intValue: Int64? {
        switch self {
        case .int8(let v): Int64(v)
        case .uint8(let v): Int64(v)
        case .int16(let v): Int64(v)
        case .uint16(let v): Int64(v)
        case .int32(let v): Int64(v)
        case .uint32(let v): Int64(v)
        case .int64(let v): v
        case .uint64(let v): v <= UInt64(Int64.max) ? Int64(v) : nil
        case .timestamp(let v): v <= UInt64(Int64.max) ? Int64(v) : nil
        default: nil
        }
    }

    public var tableValue: AMQPTable? {
        if case .table(let t) = self { return t }
        return nil
    }

    public var arrayValue: [AMQPFieldValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
}

extension AMQPFieldValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    /// Integer literals become signed 64-bit values, the type RabbitMQ itself uses for counts.
    public init(integerLiteral value: Int64) { self = .int64(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}
