import AMQP
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// `results: batched` through a real worker: every device's full result exactly once, packed in
/// `results` messages that come before their chunk's summary, across chunks, a retry round, a
/// device preferences filtered and one APNs rejected. Runs on both transports (the curl pass).
@Suite("pushworker run: results batched", .usesBroker)
struct BatchedResultsTests {
    static func token(_ index: Int) -> String { RegistryWorkerTests.token(0x100 + index) }

    /// What a producer reads of one job: each device's result, and the summaries.
    struct Read {
        var results: [String: PushResult] = [:]
        var summaries: [JobSummary] = []
        var messages = 0
        var single = 0
        var final: Int { summaries.reduce(0) { $0 + $1.outcomes.values.reduce(0, +) } }
    }

    /// Reads until `devices` results and summaries accounting for as many final outcomes are in;
    /// checks that each summary comes after its chunk's results and that no device comes twice.
    static func read(_ jobID: String, devices: Int, from consumer: AMQPConsumer) async throws -> Read {
        var read = Read()
        var pendingByChunk: [String: Int] = [:]
        while read.results.count < devices || read.final < devices {
            let delivery = try await consumer.next(within: .seconds(30))
            try await delivery.ack()
            #expect(delivery.properties.correlationID == jobID)
            switch delivery.properties.type {
            case "results":
                read.messages += 1
                let object = try #require(try JSONSerialization.jsonObject(with: Data(delivery.body)) as? [String: Any])
                #expect(object["job_id"] as? String == jobID)
                #expect(object["app"] as? String == "demo")
                let chunk = object["chunk"] as? String ?? "whole"
                let entries = try #require(object["results"] as? [Any])
                for entry in entries {
                    let result = try JSONDecoder().decode(PushResult.self, from: JSONSerialization.data(withJSONObject: entry))
                    #expect(read.results[result.token] == nil, "two results for \(result.token)")
                    read.results[result.token] = result
                    pendingByChunk[chunk, default: 0] += 1
                }
            case "summary":
                let summary = try JSONDecoder().decode(JobSummary.self, from: Data(delivery.body))
                let chunk = summary.chunk ?? "whole"
                // Every result a summary counts has come before it.
                #expect(pendingByChunk[chunk, default: 0] == summary.outcomes.values.reduce(0, +), "\(summary)")
                pendingByChunk[chunk] = 0
                read.summaries.append(summary)
            default:
                read.single += 1
            }
        }
        return read
    }

    @Test("a chunked group job with results batched: each device's full result once, in results messages before their chunk's summary, including a retry round, a filtered and a rejected device; an app's default_results applies to jobs that name none")
    func batched() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db").path
        let running = try await RegistryWorkerTests.Running.start(
            registry: "registry: {sqlite: \(file)}\nchunk_size: 2\nretry_in_process_attempts: 1\nretry_delays_ms: [300]",
            faults: [
                MockAPNsFault(.reject(.badDeviceToken), tokens: [Self.token(2)]),
                MockAPNsFault(.reject(.serviceUnavailable), tokens: [Self.token(3)], times: 1),
            ],
            appExtra: ["default_results: batched"])
        try await running.apply((1...6).flatMap { index in [
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(index))", "user": "u-\#(index)"}"#,
            #"{"command": "add_to_group", "user": "u-\#(index)", "group": "all", "create_group": true}"#,
        ] } + [#"{"command": "add_to_blacklist", "user": "u-6", "type": "promo"}"#])

        try await running.publisher.publish(.toQueue("\(running.setup.prefix).jobs", body: Array(
            #"{"id": "packed", "audience": {"groups": ["all"]}, "type": "promo", "results": "batched", "payload": {"aps": {"alert": "sale"}}}"#.utf8)))
        let read = try await Self.read("packed", devices: 6, from: running.results)
        #expect(read.single == 0, "a result published alone")
        #expect(Set(read.results.keys) == Set((1...6).map(Self.token)))
        let outcomes = read.results.mapValues(\.outcome)
        #expect(outcomes == [
            Self.token(1): .delivered, Self.token(2): .rejected, Self.token(3): .delivered,
            Self.token(4): .delivered, Self.token(5): .delivered, Self.token(6): .filtered,
        ])
        // The full result of each device: its user, APNs' id and reason, its attempts.
        let rejected = try #require(read.results[Self.token(2)])
        #expect(rejected.reason == "BadDeviceToken" && rejected.status == 400 && rejected.user == "u-2" && rejected.jobID == "packed")
        let retried = try #require(read.results[Self.token(3)])
        #expect(retried.attempts == 2 && retried.apnsID != nil && retried.status == 200)
        #expect(read.results[Self.token(6)]?.attempts == 0)
        #expect(read.summaries.contains { $0.retrying == 1 }, "the retry round: \(read.summaries)")
        #expect(read.summaries.count >= 4, "three chunks and the retry round: \(read.summaries)")

        // No `results` field: the app's default_results, batched; two devices in one message.
        try await running.publisher.publish(.toQueue("\(running.setup.prefix).jobs", body: Array(
            #"{"id": "defaulted", "audience": {"tokens": ["\#(Self.token(7))", "\#(Self.token(8))"]}, "payload": {"aps": {"alert": "hi"}}}"#.utf8)))
        let defaulted = try await Self.read("defaulted", devices: 2, from: running.results)
        #expect(defaulted.single == 0 && defaulted.messages == 1 && defaulted.summaries.count == 1)
        #expect(defaulted.results.values.allSatisfy { $0.outcome == .delivered && $0.user == nil })
        try await running.stop()
        try? FileManager.default.removeItem(atPath: file)
    }
}
