import AMQP
import APNs
import APNsHTTP2
import ArgumentParser
import CommandLineSupport
import Foundation
import Logging
import PostgresStores
import PushWorker
import SQLiteStores
import Stores

/// The registry's side of a group job, without broker or APNs: a loaded registry, and the job
/// pipeline resolving a group job, filtering it by preferences and writing it into chunk jobs
/// (counted and dropped by a stand-in publisher). Devices per second, CPU per device, and the
/// peak memory of a 100,000- and a 1,000,000-member group.
struct ResolveBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Load N users in groups with preferences; time a group job's resolution and filtering into chunk jobs.")

    @Option(help: "SQLite file for the registry (default: a new temporary file).") var sqlite: String?
    @Option(help: "PostgreSQL URL of an empty database (or one this benchmark loaded: see --no-load), instead of SQLite.") var postgres: String?
    @Option(help: "Users (one device each) in the big group.") var members = 1_000_000
    @Option(help: "Users in the small group, for the memory comparison.") var small = 100_000
    @Option(help: "Other groups the users are spread over.") var groups = 10
    @Option(name: .customLong("filtered-percent"), help: "Users whose preferences filter the job out.") var filteredPercent = 10
    @Option(name: .customLong("chunk-size"), help: "Devices per chunk job.") var chunkSize = 1000
    @Flag(name: .customLong("no-load"), help: "The registry already holds this data (from an earlier run with the same options).") var noLoad = false
    @Option(help: "Times each group job is resolved; the best run is reported.") var repeats = 3
    @Option(help: "Measure only this group (first: the small one, all: the big one); the peak memory is then the process's whole, comparable between two runs.")
    var group: String?
    @Flag(name: .customLong("load-only"), help: "Load the registry and stop.") var loadOnly = false

    func run() async throws {
        var logger = Logger(label: "pushworker.bench")
        logger.logLevel = .warning
        let synthetic = SyntheticRegistry(members: members, small: min(small, members), groups: groups, filteredPercent: filteredPercent)
        let store: any RegistryStore
        let kind: String
        if let postgres {
            store = try await PostgresRegistryStore(url: postgres, logger: logger)
            kind = "PostgreSQL"
        } else {
            let file = sqlite ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushworker-bench-\(UUID().uuidString.prefix(8)).db").path
            store = try SQLiteRegistryStore(path: file)
            kind = "SQLite \(file)"
        }
        if !noLoad {
            if let postgres { try await synthetic.load(postgres: postgres) } else { try await synthetic.load(into: store) }
        }
        if loadOnly { return }

        var settings = WorkerSettings()
        settings.chunkSize = chunkSize
        let publisher = CountingPublisher()
        let pipeline = JobPipeline(
            settings: settings, apps: [JobPipeline.App(name: "bench", topic: "com.example.bench", sender: RefusingSender())],
            publisher: publisher, resolver: RegistryResolver(store: store, logger: logger), logger: logger)

        print("pushworker-bench resolve: \(kind), \(members) users, chunks of \(chunkSize), \(filteredPercent)% filtered by preferences")
        var peaks: [Int: Double] = [:]
        let groups = [("first", synthetic.small), ("all", members)].filter { self.group == nil || $0.0 == self.group }
        guard !groups.isEmpty else { throw ValidationError("--group is first or all") }
        for (group, size) in groups {
            var best: Double = .infinity
            var cpuPerDevice = 0.0
            var peak = 0.0
            for attempt in 0..<max(1, repeats) {
                publisher.reset()
                if self.group == nil { PeakMemory.reset() }
                let before = PeakMemory.residentKibibytes
                let cpu = CPUTime.now
                let start = ContinuousClock.now
                let job = #"{"id": "bench-\#(group)-\#(attempt)", "audience": {"groups": ["\#(group)"]}, "type": "news", "subtype": "daily", "payload": {"aps": {"alert": "bench"}}}"#
                let settlement = await pipeline.run(JobDelivery(body: Array(job.utf8), properties: AMQPProperties(messageID: "bench")))
                let seconds = (ContinuousClock.now - start) / .seconds(1)
                let cpuSeconds = CPUTime.now - cpu
                guard settlement == .acknowledge else { throw CommandFailure("the group job was not split: \(settlement)") }
                let (devices, filtered, chunks) = publisher.totals
                guard devices + filtered == size, devices == synthetic.passing(of: size) else {
                    throw CommandFailure("group \(group): chunks carry \(devices) devices and \(filtered) filtered; expected \(size), \(synthetic.passing(of: size)) passing")
                }
                if seconds < best {
                    best = seconds
                    cpuPerDevice = cpuSeconds / Double(size) * 1e6
                }
                peak = max(peak, Double(PeakMemory.kibibytes) / 1024)
                if ProcessInfo.processInfo.environment["PUSHWORKER_BENCH_VERBOSE"] != nil {
                    print(String(format: "    run %d: %.2f s, peak %.1f MiB, RSS before %.1f after %.1f MiB", attempt + 1, seconds,
                        Double(PeakMemory.kibibytes) / 1024, Double(before) / 1024, Double(PeakMemory.residentKibibytes) / 1024))
                }
                if attempt == 0 {
                    print(String(format: "  group %@ (%d members): %d chunks, %d sent, %d filtered; RSS before %.1f MiB", group, size, chunks, devices, filtered, Double(before) / 1024))
                }
            }
            peaks[size] = peak
            print(String(format: "  group %@: %.0f devices/s resolved, filtered and written into chunk jobs (best of %d: %.2f s), CPU %.2f µs per device, peak RSS %.1f MiB",
                group, Double(size) / best, max(1, repeats), best, cpuPerDevice, peak))
        }
        if let small = peaks[synthetic.small], let big = peaks[members], synthetic.small != members {
            print(String(format: "peak memory %d members − %d members: %+.1f MiB (in one process; run each --group in a process of its own for a clean figure)", members, synthetic.small, big - small))
        }
        if self.group != nil {
            // No clear_refs reset was needed: nothing ran before (with --no-load).
            print(String(format: "process peak memory (VmHWM): %.1f MiB", Double(PeakMemory.kibibytes(of: nil)) / 1024))
        }
    }
}

/// Takes chunk jobs and counts what they carry, as the broker would take them.
final class CountingPublisher: MessagePublishing, @unchecked Sendable {
    private let lock = NSLock()
    private var devices = 0, filtered = 0, chunks = 0

    func publish(_ message: AMQPMessage) async throws {
        // A chunk's pairs: every "[" but the arrays around them (tokens are hex, users "u<i>",
        // the payload has none). One pass over the bytes, so the stand-in costs next to nothing.
        let key = Array(#""filtered":"#.utf8)
        let (brackets, filteredPairs) = message.body.withUnsafeBufferPointer { bytes -> (Int, Int) in
            var brackets = 0, beforeFiltered = -1
            for index in bytes.indices where bytes[index] == UInt8(ascii: "[") {
                brackets += 1
                if beforeFiltered < 0, index >= key.count, bytes[(index - key.count)..<index].elementsEqual(key) { beforeFiltered = brackets }
            }
            // After the "filtered" array opens, every "[" but its own is one of its pairs.
            return (brackets, beforeFiltered < 0 ? -1 : brackets - beforeFiltered)
        }
        lock.withLock {
            chunks += 1
            if filteredPairs >= 0 {
                filtered += filteredPairs
                devices += brackets - 2 - filteredPairs
            } else {
                devices += brackets - 1
            }
        }
    }

    func queueExists(_ queue: String) async throws -> Bool { true }

    func reset() { lock.withLock { (devices, filtered, chunks) = (0, 0, 0) } }
    var totals: (devices: Int, filtered: Int, chunks: Int) { lock.withLock { (devices, filtered, chunks) } }
}

/// A group this size is split, never sent here.
struct RefusingSender: NotificationSending {
    func send(_ requests: [APNsRequest], answers: ([APNsAnswer]) -> Void) async {
        answers(requests.indices.map { ($0, .failure(.timeout("bench resolve sends nothing"))) })
    }
}
