#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// Where the worker's log handlers put a line: one `write` per line, one line at a time, so lines
/// from several threads never mix (a pipe takes a larger write in parts).
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

    /// Writes the whole line, or what the descriptor takes of it: a log that cannot be written
    /// (standard error closed) is not a reason to stop or to wait.
    static func write(_ line: [UInt8], to fileDescriptor: Int32) {
        lock.withLock { _ in
            line.withUnsafeBytes { bytes in
                var rest = bytes
                while !rest.isEmpty {
                    let written = Glibc.write(fileDescriptor, rest.baseAddress, rest.count)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    rest = UnsafeRawBufferPointer(rebasing: rest[written...])
                }
            }
        }
    }
}
