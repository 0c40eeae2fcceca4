import Glibc
import Logging
import Stores
import Synchronization

/// One JSON object per line on standard error, for log shippers: time (UTC, milliseconds), level,
/// label, message, and the metadata as top-level keys, in key order.
///
/// Written byte by byte: `JSONSerialization` with sorted keys compares the keys through ICU's
/// collation, which made a "job done" line cost about 75 µs, more than the rest of a one-device
/// job (`pushworker-bench log`).
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let fileDescriptor: Int32

    /// The second the cached text is of, and the text up to its fraction (`2026-11-29T21:06:32`).
    private static let clock = Mutex<(second: Int, text: [UInt8])>((-1, []))

    /// - Parameter fileDescriptor: where lines go; standard error but in tests.
    public init(label: String, level: Logger.Level, fileDescriptor: Int32 = STDERR_FILENO) {
        self.label = label
        self.logLevel = level
        self.fileDescriptor = fileDescriptor
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The fields every line has; metadata of the same name gives way to them.
    private static let fixed: Set<String> = ["time", "level", "label", "message"]

    public func log(event: LogEvent) {
        var fields: [(key: String, value: Logger.Metadata.Value)] = LogOutput.metadata(metadata, event).filter { !Self.fixed.contains($0.key) }
        fields.append(("time", .string("")))
        fields.append(("level", .string(event.level.rawValue)))
        fields.append(("label", .string(label)))
        fields.append(("message", .string(event.message.description)))
        fields.sort { $0.key < $1.key }
        var line: [UInt8] = [UInt8(ascii: "{")]
        line.reserveCapacity(256)
        for (index, field) in fields.enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            JSONText.appendString(field.key, to: &line)
            line.append(UInt8(ascii: ":"))
            if field.key == "time" { Self.appendTime(to: &line) } else { Self.append(field.value, to: &line) }
        }
        line += "}\n".utf8
        LogOutput.write(line, to: fileDescriptor)
    }

    private static func append(_ value: Logger.Metadata.Value, to line: inout [UInt8]) {
        switch value {
        case .string(let text):
            JSONText.appendString(text, to: &line)
        case .stringConvertible(let convertible):
            JSONText.appendString(convertible.description, to: &line)
        case .array(let values):
            line.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                append(element, to: &line)
            }
            line.append(UInt8(ascii: "]"))
        case .dictionary(let dictionary):
            line.append(UInt8(ascii: "{"))
            for (index, pair) in dictionary.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                JSONText.appendString(pair.key, to: &line)
                line.append(UInt8(ascii: ":"))
                append(pair.value, to: &line)
            }
            line.append(UInt8(ascii: "}"))
        }
    }

    /// `"2026-11-29T21:06:32.565Z"`, as RFC 3339 with fractional seconds writes it; the part up to
    /// the second is made again only when the second changes.
    private static func appendTime(to line: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let second = now.tv_sec
        let prefix = clock.withLock { cached -> [UInt8] in
            if cached.second == second { return cached.text }
            var seconds = time_t(second)
            var utc = tm()
            gmtime_r(&seconds, &utc)
            var text: [UInt8] = []
            func digits(_ value: Int32, _ count: Int) {
                var place = 1
                for _ in 1..<count { place *= 10 }
                var rest = Int(value)
                while place > 0 {
                    text.append(UInt8(ascii: "0") + UInt8(rest / place % 10))
                    rest %= place
                    place /= 10
                }
            }
            digits(utc.tm_year + 1900, 4)
            text.append(UInt8(ascii: "-"))
            digits(utc.tm_mon + 1, 2)
            text.append(UInt8(ascii: "-"))
            digits(utc.tm_mday, 2)
            text.append(UInt8(ascii: "T"))
            digits(utc.tm_hour, 2)
            text.append(UInt8(ascii: ":"))
            digits(utc.tm_min, 2)
            text.append(UInt8(ascii: ":"))
            digits(utc.tm_sec, 2)
            cached = (second, text)
            return text
        }
        let milliseconds = now.tv_nsec / 1_000_000
        line.append(UInt8(ascii: "\""))
        line += prefix
        line.append(UInt8(ascii: "."))
        line.append(UInt8(ascii: "0") + UInt8(milliseconds / 100))
        line.append(UInt8(ascii: "0") + UInt8(milliseconds / 10 % 10))
        line.append(UInt8(ascii: "0") + UInt8(milliseconds % 10))
        line += "Z\"".utf8
    }
}
