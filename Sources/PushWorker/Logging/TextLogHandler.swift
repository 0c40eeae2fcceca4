import Glibc
import Logging
import Synchronization

/// Text lines on standard error, in `StreamLogHandler`'s layout (time, level, label, the metadata
/// as sorted `key=value` pairs, [source], message), so what operators and their tools read stays
/// the same. Written here because a worker logs a "job done" line for every job: swift-log's
/// handler formats the time with `localtime` and `strftime` on every line and builds the line from
/// a string per pair, 3.8–3.9 µs a line against 1.8–2.1 µs here (`pushworker-bench log`, the
/// metadata's making included), a visible share of a one-device job. The time's text is made
/// once a second.
public struct TextLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let fileDescriptor: Int32

    /// The second the cached text is of, and the text.
    private static let clock = Mutex<(second: time_t, text: String)>((-1, ""))

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

    public func log(event: LogEvent) {
        let pairs = LogOutput.metadata(metadata, event)
        var line: [UInt8] = []
        line.reserveCapacity(192)
        line += Self.timestamp().utf8
        line.append(UInt8(ascii: " "))
        line += event.level.rawValue.utf8
        if !label.isEmpty { line.append(UInt8(ascii: " ")) }
        line += label.utf8
        line.append(UInt8(ascii: ":"))
        for (key, value) in pairs.sorted(by: { $0.key < $1.key }) {
            line.append(UInt8(ascii: " "))
            line += key.utf8
            line.append(UInt8(ascii: "="))
            if case .string(let text) = value { line += text.utf8 } else { line += value.description.utf8 }
        }
        line += " [".utf8
        line += event.source.utf8
        line += "] ".utf8
        line += event.message.description.utf8
        line.append(UInt8(ascii: "\n"))
        LogOutput.write(line, to: fileDescriptor)
    }

    /// The local time as `strftime("%Y-%m-%dT%H:%M:%S%z")` makes it, made again only when the second changes.
    private static func timestamp() -> String {
        var now = time(nil)
        if let text = clock.withLock({ $0.second == now ? $0.text : nil }) { return text }
        var local = tm()
        guard localtime_r(&now, &local) != nil else { return "<unknown>" }
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        let text = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        clock.withLock { $0 = (now, text) }
        return text
    }
}
