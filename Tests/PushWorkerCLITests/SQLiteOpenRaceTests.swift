import Foundation
import TestSupport
import Testing

/// Workers of one host started together open a new SQLite file at the same moment: each must open
/// it, none fail its start because another held the file while it turned on WAL (that change of
/// journal mode answers "database is locked" at once, without SQLite's busy handler). Processes,
/// not threads: within one process SQLite's locks do not collide so.
@Suite("SQLite files opened by several processes at once")
struct SQLiteOpenRaceTests {
    @Test("eight pushworker processes opening one new ledger file at once all open it, thirty files in a row")
    func openTogether() async throws {
        // Thirty rounds of waiting for processes: on a thread of its own, not the test pool's.
        try await onOwnThread { try Self.openTogetherHere() }
    }

    static func openTogetherHere() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("open-race-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for round in 0..<30 {
            let config = directory.appendingPathComponent("config-\(round).yaml")
            try "ledger: {sqlite: \(directory.appendingPathComponent("ledger-\(round).db").path)}\napps: []\n".write(to: config, atomically: true, encoding: .utf8)
            let processes = try (0..<8).map { _ in
                let process = Process()
                process.executableURL = Program.executable
                process.arguments = ["deliveries", "--config", config.path, "--job", "j"]
                let errors = Pipe()
                process.standardOutput = FileHandle.nullDevice
                process.standardError = errors
                try process.run()
                return (process, errors)
            }
            for (process, errors) in processes {
                let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                #expect(process.terminationStatus == 0, "round \(round): \(said)")
            }
        }
    }
}
