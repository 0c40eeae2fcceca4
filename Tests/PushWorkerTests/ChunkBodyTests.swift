import APNs
import Foundation
import PushWorker
import Testing

@Suite("Chunk job bodies")
struct ChunkBodyTests {
    @Test("a chunk body decodes to the same job with its (token, user) pairs; the payload's bytes are spliced in unchanged")
    func roundTrip() throws {
        let decoder = JobDecoder(apps: ["demo": "com.example.app"])
        let token = String(repeating: "cd", count: 32)
        let enqueued = Date(timeIntervalSince1970: 1_800_000_000)
        let job = try decoder.decode(Array(#"""
            {"id": "j", "audience": {"tokens": ["\#(token)"], "users": ["u"]}, "type": "t", "subtype": "s",
             "payload": {"aps": {"alert": {"title": "Ünïcode \"quoted\"", "body": "a/b"}}, "k": [1, 2.5, null]},
             "push_type": "alert", "priority": 5, "expiration": {"after_seconds": 60}, "collapse_id": "c",
             "topic": "com.example.app", "results": "failures", "reply_to": "q"}
            """#.utf8), enqueuedAt: enqueued)
        // Users are any strings: quotes, backslashes, control characters and non-ASCII survive.
        let devices = [Recipient(token: token, user: "u-\"1\"\\\n\u{1}ü"), Recipient(token: String(repeating: "ef", count: 32), user: nil)]
        let filtered = [Recipient(token: String(repeating: "ab", count: 32), user: "u-2")]
        let body = try job.chunkBody(devices: devices, filtered: filtered)
        #expect(body.suffix(job.payload.count + 1) == ArraySlice(job.payload + [UInt8(ascii: "}")]))
        let chunk = try decoder.decode(body, enqueuedAt: Date(timeIntervalSince1970: 0), chunk: true)
        #expect(chunk.payload == job.payload)
        #expect(chunk.audience == PushJob.Audience(devices: devices, filtered: filtered))
        // The relative expiration is fixed to its deadline, so a chunk taken later lives no longer.
        #expect(chunk.expiration?.deadline == enqueued.addingTimeInterval(60))
        var expected = job
        expected.audience = chunk.audience
        expected.expiration = chunk.expiration
        #expect(chunk == expected)
    }

    @Test("an immediate expiration stays immediate in a chunk")
    func immediate() throws {
        let decoder = JobDecoder(apps: ["demo": "com.example.app"])
        let job = try decoder.decode(Array(#"{"audience": {"tokens": []}, "payload": {"aps": {}}, "expiration": 0}"#.utf8))
        #expect(try decoder.decode(try job.chunkBody(devices: []), chunk: true).expiration == .immediately)
    }

    @Test("resolved devices are for chunk jobs only: a producer's job naming them is refused with the field")
    func producerDevices() throws {
        let decoder = JobDecoder(apps: ["demo": "com.example.app"])
        let token = String(repeating: "cd", count: 32)
        #expect(throws: JobError(.invalidField, field: "audience.devices", "audience.devices is written by pushworker into chunk jobs only; name tokens, users or groups")) {
            try decoder.decode(Array(#"{"audience": {"devices": [["\#(token)", "u"]]}, "payload": {"aps": {}}}"#.utf8))
        }
        #expect(throws: JobError(.invalidField, field: "audience.devices[1]", "audience.devices[1] must be a [token, user or null] pair (with \"fcm\" third for an Android device)")) {
            try decoder.decode(Array(#"{"audience": {"devices": [["\#(token)", null], ["\#(token)"]]}, "payload": {"aps": {}}}"#.utf8), chunk: true)
        }
        do {
            _ = try decoder.decode(Array(#"{"audience": {"filtered": [["zz", "u"]]}, "payload": {"aps": {}}}"#.utf8), chunk: true)
            Issue.record("a chunk with a bad token was accepted")
        } catch {
            #expect(error.code == .invalidToken && error.field == "audience.filtered[0]", "\(error)")
        }
    }
}
