import Glibc
import Logging
import Synchronization

/// Where the worker's log handlers put a line: one `write` per line, one line at a time, so lines
/// from several threads never mix (a pipe takes a write larger than `PIPE_BUF` in parts).
enum LogOutput {
    private static let lock = Mutex<Void>(())

    /// A line's metadata: the handler's, the event's over it, and the event's error as
    /// `StreamLogHandler` adds one (`error.message`, `error.type`).
    static func metadata(_ base: Logger.Metadata, _ event: LogEvent) -> Logger.Metadata {
        var pairs = base
        if let explicit = event.metadata, !explicit.isEmpty {
            if pairs.isEmpty { pairs = explicit } else { pairs.merge(explicit) { $1 } }
        }
        if let error = event.error {
            pairs["error.message"] = "\(error)"
            pairs["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        return pairs
    }

    /// Writes the line whole, as `StreamLogHandler`'s `fwrite` did: a full pipe waits for its
    /// reader. On an error (a non-blocking descriptor that is full, a reader gone) the rest is
    /// dropped, and a line cut short is ended with a newline, so the next starts on a line of
    /// its own (a JSON log stays one object a line).
    static func write(_ line: [UInt8], to fileDescriptor: Int32) {
        lock.withLock { _ in
            line.withUnsafeBytes { bytes in
                var rest = bytes
                while !rest.isEmpty {
                    let written = Glibc.write(fileDescriptor, rest.baseAddress, rest.count)
                    if written >= 0 {
                        rest = UnsafeRawBufferPointer(rebasing: rest[written...])
                    } else if errno != EINTR {
                        if rest.count < bytes.count {
                            var newline = UInt8(ascii: "\n")
                            _ = Glibc.write(fileDescriptor, &newline, 1)
                        }
                        return
                    }
                }
            }
        }
    }
}
