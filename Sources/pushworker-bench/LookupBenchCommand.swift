import ArgumentParser
import Foundation
import SQLiteStores
import Stores

/// A one-device job's registry lookup, alone: `SQLiteRegistryStore.devices` for one token, in a
/// new file of 1,000 registered devices (each with a user), COUNT times on one thread, for a
/// token the registry does not have (as `bench.sh transactional` sends) and for one it has.
struct LookupBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lookup",
        abstract: "Look one token up in an SQLite registry COUNT times: CPU µs per lookup.")

    @Option(help: "Lookups of each kind.") var count = 100_000

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushworker-lookup-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteRegistryStore(path: directory.appendingPathComponent("registry.sqlite").path)
        let token = { (index: Int) in String(format: "%064x", index) }
        try await store.apply(batch: (0..<1000).map { .registerDevice(app: "bench", token: token($0), user: "user-\($0)") })
        for (name, lookedUp) in [("unregistered token", { (index: Int) in token(1000 + index) }), ("registered token", { (index: Int) in token(index % 1000) })] {
            let cpu = CPUTime.now
            var found = 0
            for index in 0..<count { found += try await store.devices(app: "bench", tokens: [lookedUp(index)]).count }
            print(String(format: "%@: %.2f µs CPU per lookup, %d lookups, %d found", name, (CPUTime.now - cpu) / Double(count) * 1e6, count, found))
        }
    }
}
