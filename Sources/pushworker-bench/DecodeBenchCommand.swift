import ArgumentParser
import Foundation
import PushWorker

/// Reading a job, alone: a one-device job's body (the one `bench.sh transactional` publishes) and
/// a job of 1,000 tokens, parsed (`JSONDocument.parse`) and decoded (`JobDecoder.decode`, which
/// parses too) COUNT times on one thread, with the CPU time per job beside the wall time.
struct DecodeBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Parse and decode job bodies COUNT times: CPU µs per job for a one-device job and a 1,000-token job.")

    @Option(help: "Times each body is read.") var count = 100_000

    func run() async throws {
        let token = { (index: Int) in String(format: "%08x%056x", index, index) }
        let oneDevice = #"{"id": "tx-1", "audience": {"tokens": ["\#(token(1))"]}, "payload": {"aps": {"alert": {"title": "Order", "body": "Your code is 4711"}}}, "reply_to": "bench.results"}"#
        let thousand = #"{"id": "tx-1000", "audience": {"tokens": [\#((0..<1000).map { "\"\(token($0))\"" }.joined(separator: ", "))]}, "payload": {"aps": {"alert": "hello"}}, "results": "batched"}"#
        let decoder = JobDecoder(apps: ["bench": "com.example.bench"])
        for (name, body, times) in [("one-device job", oneDevice, count), ("1,000-token job", thousand, max(1, count / 100))] {
            let bytes = Array(body.utf8)
            _ = try decoder.decode(bytes)
            measure("\(name), parse", bytes: bytes.count, times: times) { _ = try JSONDocument.parse(bytes) }
            measure("\(name), decode", bytes: bytes.count, times: times) { _ = try decoder.decode(bytes) }
        }
    }

    private func measure(_ name: String, bytes: Int, times: Int, _ body: () throws -> Void) {
        let cpu = CPUTime.now
        let start = ContinuousClock.now
        for _ in 0..<times { try? body() }
        let wall = (ContinuousClock.now - start) / .seconds(1)
        print(String(format: "%@ (%d bytes): %.2f µs per job (CPU %.2f µs), %d times", name, bytes, wall / Double(times) * 1e6,
            (CPUTime.now - cpu) / Double(times) * 1e6, times))
    }
}
