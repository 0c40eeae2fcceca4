import Foundation
@testable import PushWorker
import Stores
import TestSupport
import Testing

/// The JSON Schemas in docs/schemas agree with the decoder and the encoders: what the schema
/// refuses, the decoder refuses with an error; what the decoder accepts, the schema accepts; what
/// the worker publishes, the result and summary schemas accept.
@Suite("JSON Schemas of jobs, results and summaries")
struct SchemaTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let schemas = root.appendingPathComponent("docs/schemas")

    /// Codes a schema cannot decide: the serialised payload size, and whether an app is configured.
    static let beyondSchema: Set<String> = ["payload_too_large", "unknown_app"]
    /// Jobs that are invalid only with the app's configuration, which a schema does not see.
    static let beyondSchemaFiles: Set<String> = ["voip-no-topic.json"]

    static func validate(_ schema: String, _ files: [URL]) async throws -> [String] {
        let result = try await Program.running(
            [schemas.appendingPathComponent("validate.py").path, schemas.appendingPathComponent(schema).path] + files.map(\.path),
            program: URL(fileURLWithPath: "/usr/bin/python3"))
        guard result.status == 0 else { throw TestFailure("validate.py failed (is python3-jsonschema installed?): \(result.standardError)") }
        return result.standardOutput.split(separator: "\n").map(String.init)
    }

    @Test("the job schema refuses every corpus job the decoder refuses for a reason a schema can express")
    func corpus() async throws {
        let entries = JobDecoderTests.corpus
        let verdicts = try await Self.validate("job.schema.json", entries.map { JobDecoderTests.corpusDirectory.appendingPathComponent($0.file) })
        #expect(verdicts.count == entries.count)
        for (entry, verdict) in zip(entries, verdicts) {
            if Self.beyondSchema.contains(entry.code) || Self.beyondSchemaFiles.contains(entry.file) {
                #expect(verdict == "valid", "\(entry.file): \(verdict)")
            } else {
                #expect(verdict != "valid", "\(entry.file) (\(entry.code)) passes the schema")
            }
        }
    }

    @Test("jobs the decoder accepts pass the schema")
    func validJobs() async throws {
        let token = String(repeating: "ab", count: 32)
        let jobs = [
            #"{"audience": {"tokens": []}, "payload": {"aps": {}}}"#,
            #"{"id": "j", "app": "demo", "audience": {"tokens": ["\#(token)"], "users": ["u"], "groups": ["g"]}, "type": "t", "subtype": "s", "payload": {"aps": {"alert": "x"}}, "push_type": "voip", "topic": "com.example.app.voip", "priority": 5, "expiration": {"after_seconds": 60}, "collapse_id": "c", "results": "failures", "reply_to": "q"}"#,
            #"{"audience": {"users": ["u"]}, "payload": {"aps": {}}, "expiration": "immediate"}"#,
            #"{"audience": {"groups": ["g"]}, "payload": {"aps": {"content-available": 1}}, "expiration": "2030-01-01T00:00:00Z", "push_type": "background", "priority": 1}"#,
            #"{"audience": {"tokens": ["\#(token)"]}, "payload": {"aps": {}}, "expiration": 1900000000}"#,
            #"{"audience": {"tokens": ["\#(JobDecoderTests.loggedForms.joined(separator: "\", \""))"]}, "payload": {"aps": {}}}"#,
            #"{"audience": {"groups": ["fans"]}, "type": "scores", "live_activity": {"event": "start", "attributes_type": "MatchAttributes", "attributes": {"home": "A"}, "content_state": {"score": "0-0"}, "alert": {"title": "Kick-off", "body": "A v B"}, "input_push_token": true, "relevance_score": 10}, "payload": {"match": 42}}"#,
            #"{"audience": {"activity": "match-42"}, "priority": 10, "live_activity": {"event": "update", "content_state": {"score": "1-0"}, "stale_date": "2026-11-25T22:00:00Z", "timestamp": 1790000000}}"#,
            #"{"audience": {"activity": "match-42", "tokens": ["\#(token)"]}, "live_activity": {"event": "end", "dismissal_date": 1790003600}}"#,
            #"{"audience": {"channel": "dHN0LXNyY2gtY2hubA=="}, "push_type": "liveactivity", "expiration": "immediate", "live_activity": {"event": "update", "content_state": {"score": "1-1"}}}"#,
            #"{"audience": {"tokens": ["\#(token)"], "fcm_tokens": ["\#(FCMJobTests.android)"]}, "notification": {"title": "Goal", "body": "2-1", "image": "https://example.com/g.png"}, "fcm": {"data": {"match": "7"}, "android": {"priority": "high", "ttl": 600, "collapse_key": "score", "direct_boot_ok": false, "notification": {"channel_id": "scores"}}}, "priority": 10}"#,
            #"{"audience": {"fcm_tokens": ["\#(FCMJobTests.android)"]}, "fcm": {"data": {"sync": "1"}}}"#,
        ]
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var files = [Self.root.appendingPathComponent("examples/job.json")]
        for (index, job) in jobs.enumerated() {
            let file = directory.appendingPathComponent("\(index).json")
            try Data(job.utf8).write(to: file)
            files.append(file)
        }
        let decoder = JobDecoder(apps: ["demo": "com.example.app"])
        for file in files { _ = try decoder.decode(Array(try Data(contentsOf: file))) }
        #expect(try await Self.validate("job.schema.json", files) == Array(repeating: "valid", count: files.count))
    }

    @Test("the registry command schema accepts the commands and queries docs/registry.md shows and the parser accepts, and refuses every malformed one a schema can decide")
    func registryCommands() async throws {
        let page = try String(contentsOf: Self.root.appendingPathComponent("docs/registry.md"), encoding: .utf8)
        // The examples block after "One example of each", and the queries' requests.
        let examples = page.components(separatedBy: "One example of each")[1].components(separatedBy: "```json\n")[1].components(separatedBy: "```")[0]
            .split(separator: "\n").map(String.init)
        let queries = page.components(separatedBy: "### Queries")[1].split(separator: "\n").filter { $0.hasPrefix(#"{"command": "status""#) }.map(String.init)
        #expect(examples.count >= 10 && queries.count == 2)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func files(_ documents: [String], _ prefix: String) throws -> [URL] {
            try documents.enumerated().map { index, text in
                let file = directory.appendingPathComponent("\(prefix)-\(index).json")
                try Data(text.utf8).write(to: file)
                return file
            }
        }
        let channels = page.components(separatedBy: "### Broadcast channels")[1].components(separatedBy: "\n#")[0].split(separator: "\n").filter { $0.hasPrefix(#"{"command": ""#) }.map(String.init)
        #expect(channels.count == 1)
        let valid = examples + queries.map { $0.replacingOccurrences(of: "…", with: String(repeating: "0", count: 56)) } + channels + [
            #"{"command": "list_channels", "app": "sports"}"#, #"{"command": "show_channel", "app": "sports", "channel": "dHN0LXNyY2gtY2hubA=="}"#,
            #"{"command": "delete_channel", "app": "sports", "channel": "dHN0LXNyY2gtY2hubA=="}"#,
            #"{"command": "get_deliveries", "idempotency_key": "order-1", "app": "demo", "limit": 2, "after": "WzE3OTUwMDAwMDAwMDAsImFiYWIiLCJqLTEiLCJkZW1vIl0"}"#,
        ]
        for text in valid { _ = try RegistryRequest(json: Array(text.utf8)) }
        #expect(try await Self.validate("registry-command.schema.json", try files(valid, "valid")) == Array(repeating: "valid", count: valid.count))
        // Refusals a schema cannot make: the app's configuration, the group's existence; and bodies that are not JSON objects.
        let malformed = MalformedRegistryCommand.corpus.filter { !["unknown_app", "unknown_group", "invalid_json"].contains($0.code) }
        let verdicts = try await Self.validate("registry-command.schema.json", try files(malformed.map(\.json), "bad"))
        for (entry, verdict) in zip(malformed, verdicts) {
            #expect(verdict.hasPrefix("invalid"), "\(entry.json) (\(entry.code)) passes the schema")
        }
    }

    @Test("results and summaries as the worker writes them pass their schemas; a summary's bytes are the encoder's")
    func published() async throws {
        let encoder = JSONEncoder()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func write(_ value: some Encodable, _ name: String) throws -> URL {
            let file = directory.appendingPathComponent(name)
            try encoder.encode(value).write(to: file)
            return file
        }
        func write(_ result: PushResult, _ name: String) throws -> URL {
            let file = directory.appendingPathComponent(name)
            try Data(result.json).write(to: file)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(result.json)) as? [String: Any])
            #expect(object.keys.sorted() == ["apns_id", "apns_unique_id", "app", "attempts", "job_id", "outcome", "reason", "status", "timestamp", "token", "user"])
            return file
        }
        let results = [
            try write(PushResult(jobID: "j", token: "ab", app: "demo", outcome: .delivered, status: 200, apnsID: "id", attempts: 1), "r1.json"),
            try write(PushResult(jobID: "j", token: "ab", user: "u", app: "demo", outcome: .rejected, status: 410, reason: "Unregistered", timestamp: 1_700_000_000_000, attempts: 2), "r2.json"),
            try write(PushResult(jobID: "j", token: "ab", app: "demo", outcome: .expired, attempts: 0), "r3.json"),
        ]
        var broadcast = PushResult(jobID: "j", token: "", app: "demo", outcome: .rejected, status: 400, reason: "ChannelNotRegistered", attempts: 1)
        broadcast.channel = "dHN0LXNyY2gtY2hubA=="
        broadcast.requestID = "6a1e3c5e-0000-4000-8000-000000000000"
        let broadcastFile = directory.appendingPathComponent("r4.json")
        try Data(broadcast.json).write(to: broadcastFile)
        let broadcastObject = try #require(try JSONSerialization.jsonObject(with: Data(broadcast.json)) as? [String: Any])
        #expect(broadcastObject["token"] is NSNull && broadcastObject["request_id"] as? String == broadcast.requestID)
        #expect(try JSONDecoder().decode(PushResult.self, from: Data(broadcast.json)) == broadcast)
        var android = PushResult(jobID: "j", token: FCMJobTests.android, app: "demo", outcome: .delivered, status: 200, attempts: 1)
        android.platform = .fcm
        android.fcmName = "projects/demo/messages/1"
        let androidFile = directory.appendingPathComponent("r5.json")
        try Data(android.json).write(to: androidFile)
        let androidObject = try #require(try JSONSerialization.jsonObject(with: Data(android.json)) as? [String: Any])
        #expect(androidObject["platform"] as? String == "fcm" && androidObject["fcm_name"] as? String == "projects/demo/messages/1")
        #expect(try JSONDecoder().decode(PushResult.self, from: Data(android.json)) == android)
        #expect(try await Self.validate("result.schema.json", results + [broadcastFile, androidFile]) == ["valid", "valid", "valid", "valid", "valid"])
        // A batched job's message, as ResultBatch writes it; and one with a result missing a key.
        let batch = ResultBatch(jobID: "j", app: "demo", chunk: "1/2")
        for index in 0..<3 {
            _ = batch.add(PushResult(jobID: "j", token: "ab\(index)", app: "demo", outcome: .delivered, status: 200, apnsID: "id", attempts: 1))
        }
        let packed = directory.appendingPathComponent("b1.json")
        try Data(try #require(batch.drain()).body).write(to: packed)
        let broken = directory.appendingPathComponent("b2.json")
        try Data(#"{"job_id": "j", "app": "demo", "chunk": null, "results": [{"job_id": "j"}]}"#.utf8).write(to: broken)
        let verdicts = try await Self.validate("result-batch.schema.json", [packed, broken])
        #expect(verdicts.first == "valid" && verdicts.last?.hasPrefix("invalid: results/0") == true, "\(verdicts)")
        var chunk = JobSummary(jobID: "j", app: "demo", devices: 3, outcomes: [.delivered: 2, .failed: 1], durationMilliseconds: 12)
        chunk.chunk = "2/5"
        chunk.retrying = 1
        chunk.removed = 1
        var held = JobSummary(jobID: "later", app: "demo", devices: 0, outcomes: [:], durationMilliseconds: 0)
        held.scheduledFor = "2026-11-27T09:00:00Z"
        var duplicate = JobSummary(jobID: "twice \"é\" \\", app: "demo", devices: 0, outcomes: [:], durationMilliseconds: 0)
        duplicate.duplicateOf = "first/1"
        var deferred = JobSummary(jobID: "q", app: "demo", devices: 4, outcomes: [.cancelled: 1, .filtered: 1, .expired: 1, .rejected: 1], durationMilliseconds: 7)
        deferred.deferred = 2
        let refused = JobSummary(jobID: "bad", app: nil, devices: 0, outcomes: [:], error: JobError(.invalidField, field: "priority", "priority 7"), durationMilliseconds: 0)
        let fieldless = JobSummary(jobID: "bad\ttab", app: nil, devices: 0, outcomes: [:], error: JobError(.invalidJSON, field: nil, "not JSON:\n'x' at 1\r\u{08}\u{0C}\u{01}\u{1F}"), durationMilliseconds: 0)
        // The worker splices a summary's bytes; they are what the encoder makes of its Codable form.
        let sorted = JSONEncoder()
        sorted.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var summaries: [URL] = []
        for (index, summary) in [chunk, refused, held, duplicate, deferred, fieldless].enumerated() {
            #expect(String(decoding: summary.json, as: UTF8.self) == String(decoding: try sorted.encode(summary), as: UTF8.self))
            #expect(try JSONDecoder().decode(JobSummary.self, from: Data(summary.json)) == summary)
            let file = directory.appendingPathComponent("s\(index).json")
            try Data(summary.json).write(to: file)
            summaries.append(file)
        }
        #expect(try await Self.validate("summary.schema.json", summaries) == Array(repeating: "valid", count: summaries.count))
    }
}
