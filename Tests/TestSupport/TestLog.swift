import Foundation
import Logging
import Synchronization

/// Where the log lines of the clients and servers that run inside the test process go: a file,
/// not the test output. The broker-restart and fault tests make those clients log reconnects and
/// failures on purpose; in the test output a newcomer would read them as failures.
///
/// `PUSHWORKER_TEST_LOG` names the file (`deploy/local/test.sh` sets it and says where it is);
/// by default it is `pushworker-tests.log` in the temporary directory.
public enum TestLog {
    public static let path: String = {
        ProcessInfo.processInfo.environment["PUSHWORKER_TEST_LOG"]
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushworker-tests.log").path
    }()

    /// Sends every logger made from now on to the file. Called by the fixtures every test starts
    /// with (the test broker, the mock APNs), since Swift Testing has no process-wide set-up.
    public static func bootstrap() {
        _ = bootstrapped
    }

    private static let bootstrapped: Void = {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let file = FileHandle(forWritingAtPath: path)
        LoggingSystem.bootstrap { label in FileLogHandler(label: label, file: file) }
    }()
}

/// Plain text lines: time, level, label, message, metadata.
struct FileLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info
    let label: String
    let file: FileHandle?
    private static let output = Mutex<Void>(())

    init(label: String, file: FileHandle?) {
        self.label = label
        self.file = file
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        guard let file else { return }
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let line = "\(Date()) \(event.level) \(label): \(event.message) \(fields)\n"
        Self.output.withLock { _ in file.write(Data(line.utf8)) }
    }
}
