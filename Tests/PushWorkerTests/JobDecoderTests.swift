import APNs
import Foundation
import PushWorker
import Testing

@Suite("Job decoding and validation")
struct JobDecoderTests {
    static let decoder = JobDecoder(apps: ["demo": "com.example.app"])
    static let token = String(repeating: "ab", count: 32)

    struct CorpusEntry: Sendable, CustomStringConvertible {
        let file: String
        let code: String
        let field: String
        var description: String { file }
    }

    static let corpusDirectory = Bundle.module.url(forResource: "Fixtures", withExtension: nil)!.appendingPathComponent("invalid-jobs")

    static let corpus: [CorpusEntry] = {
        let manifest = try! String(contentsOf: corpusDirectory.appendingPathComponent("manifest.tsv"), encoding: .utf8)
        return manifest.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { line in
            let columns = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            return CorpusEntry(file: columns[0], code: columns[1], field: columns.count > 2 ? columns[2] : "")
        }
    }()

    @Test("the corpus has at least 30 invalid jobs")
    func corpusSize() {
        #expect(Self.corpus.count >= 30)
    }

    @Test("each invalid job is refused with its stable code and a message naming the field", arguments: corpus)
    func invalid(_ entry: CorpusEntry) throws {
        let body = Array(try Data(contentsOf: Self.corpusDirectory.appendingPathComponent(entry.file)))
        do {
            let job = try Self.decoder.decode(body, messageID: "m-1")
            Issue.record("accepted \(entry.file): \(job)")
        } catch {
            #expect(error.code.rawValue == entry.code, "\(error)")
            if entry.field.isEmpty {
                #expect(error.field == nil)
            } else {
                #expect(error.field == entry.field)
                #expect(error.message.contains(entry.field), "\(error.message)")
            }
            #expect(!error.message.isEmpty)
        }
    }

    /// A 32-byte token as apps log it: NSData's description (upper case here), and with spaces
    /// between pairs; each is the token `3f1c…` once normalised.
    static let loggedForms: [String] = {
        let hex = (0..<32).map { String(format: "%02x", ($0 * 37 + 0x3f) % 256) }.joined()
        let groups = stride(from: 0, to: 64, by: 8).map { start in hex.dropFirst(start).prefix(8) }.joined(separator: " ")
        let pairs = stride(from: 0, to: 64, by: 2).map { start in hex.dropFirst(start).prefix(2) }.joined(separator: " ")
        return [hex, "<\(groups.uppercased())>", "<\(groups)>", " \(pairs.uppercased()) ", hex.uppercased(), "< \(groups) >"]
    }()

    @Test("tokens as apps log them (upper case, spaces, one enclosing < >) are normalised to lower-case hex; other shapes stay invalid_token")
    func loggedTokens() throws {
        let expected = Self.loggedForms[0]
        for form in Self.loggedForms {
            let job = try Self.decoder.decode(Array(#"{"audience": {"tokens": ["\#(form)"]}, "payload": {"aps": {}}}"#.utf8))
            #expect(job.audience.tokens == [expected], "\(form)")
        }
        for bad in ["<\(expected)", "\(expected)>", "<<\(expected)>>", expected.prefix(10) + "-" + expected.dropFirst(10), "<>", " "] {
            do {
                _ = try Self.decoder.decode(Array(#"{"audience": {"tokens": ["\#(expected)", "\#(bad)"]}, "payload": {"aps": {}}}"#.utf8))
                Issue.record("accepted '\(bad)'")
            } catch {
                #expect(error.code == .invalidToken && error.field == "audience.tokens[1]", "\(bad): \(error)")
            }
        }
    }

    @Test("an Android registration token in audience.tokens is refused as one, naming the field and saying what serves it")
    func androidToken() {
        let android = "cXyZ0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)
        do {
            _ = try Self.decoder.decode(Array(#"{"audience": {"tokens": ["\#(Self.token)", "\#(android)"]}, "payload": {"aps": {}}}"#.utf8))
            Issue.record("an FCM token was taken for an APNs one")
        } catch {
            #expect(error.code == .invalidToken && error.field == "audience.tokens[1]")
            #expect(error.message.contains("FCM registration token") && error.message.contains("audience.fcm_tokens"), "\(error)")
        }
    }

    @Test("with no push_type, a payload asking only for content-available is background (priority 5 on the wire), anything else alert; voip and complication payloads are free")
    func inferredPushType() throws {
        func decoded(_ rest: String) throws -> PushJob {
            try Self.decoder.decode(Array(#"{"audience": {"tokens": ["\#(Self.token)"]}, \#(rest)}"#.utf8))
        }
        let silent = try decoded(#""payload": {"aps": {"content-available": 1}, "sync": 7}"#)
        #expect(silent.pushType == .background && silent.priority == nil)
        #expect(APNsRequest(deviceToken: Self.token, topic: "t", pushType: silent.pushType, priority: silent.priority, payload: silent.payload).effectivePriority == .conservePower)
        #expect(try decoded(#""payload": {"aps": {"content-available": 1}}, "priority": 1"#).pushType == .background)
        #expect(try decoded(#""payload": {"aps": {"content-available": 1, "alert": "new mail"}}"#).pushType == .alert)
        #expect(try decoded(#""payload": {"aps": {"content-available": 1, "badge": 2}}"#).pushType == .alert)
        #expect(try decoded(#""payload": {"aps": {"content-available": 0}}"#).pushType == .alert)
        #expect(try decoded(#""payload": {"aps": {"alert": "hi", "mutable-content": 1}}"#).pushType == .alert)
        // A producer who names the type keeps it.
        #expect(try decoded(#""payload": {"aps": {"content-available": 1}}, "push_type": "alert""#).pushType == .alert)
        // Other push types keep their own rules: no aps needed.
        #expect(try decoded(#""payload": {"caller": "x"}, "push_type": "voip", "topic": "com.example.app.voip""#).pushType == .voip)
        #expect(try decoded(#""payload": {}, "push_type": "complication", "topic": "com.example.app.complication""#).pushType == .complication)
    }

    @Test("a counted badge (\"increment\" or {\"increment\": N}) is read, each device's payload carries its count, and a chunk job carries the badge as the producer wrote it")
    func countedBadge() throws {
        func decoded(_ badge: String) throws(JobError) -> PushJob {
            try Self.decoder.decode(Array(#"{"id": "b", "audience": {"tokens": ["\#(Self.token)"]}, "payload": {"aps": {"alert": "new mail", "badge": \#(badge)}, "mail": 7}}"#.utf8))
        }
        let once = try decoded(#""increment""#)
        #expect(once.badge?.amount == 1)
        let three = try decoded(#"{"increment": 3}"#)
        #expect(three.badge?.amount == 3)
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(three.badge!.payload(count: 42))) as? [String: Any])
        #expect((payload["aps"] as? [String: Any])?["badge"] as? Int == 42)
        #expect((payload["aps"] as? [String: Any])?["alert"] as? String == "new mail" && payload["mail"] as? Int == 7)
        #expect(try decoded("5").badge == nil, "a number is sent as it is")
        #expect(try decoded("null").badge == nil)
        // The placeholder's digits elsewhere in the payload are left alone.
        let text = try Self.decoder.decode(Array(#"{"audience": {"tokens": ["\#(Self.token)"]}, "payload": {"aps": {"alert": "order 987654321987 shipped", "badge": "increment"}}}"#.utf8))
        let counted = try #require(text.badge)
        let sent = try #require(try JSONSerialization.jsonObject(with: Data(counted.payload(count: 3))) as? [String: Any])
        #expect((sent["aps"] as? [String: Any])?["alert"] as? String == "order 987654321987 shipped")
        #expect((sent["aps"] as? [String: Any])?["badge"] as? Int == 3)
        // The chunk job a worker writes decodes to the same counted badge.
        let chunk = try Self.decoder.decode(try three.chunkBody(devices: [Recipient(token: Self.token, user: "u")]), chunk: true)
        #expect(chunk.badge == three.badge && chunk.payload == three.payload)
        for bad in [#""more""#, #"{"increment": 0}"#, #"{"increment": "2"}"#, #"{"increment": 1, "by": 2}"#, "true", #"{"increment": 2.5}"#] {
            do {
                _ = try decoded(bad)
                Issue.record("accepted \(bad)")
            } catch {
                #expect(error.code == .invalidPayload && error.field == "payload.aps.badge", "\(bad): \(error)")
            }
        }
    }

    @Test("a minimal job gets the contract's defaults")
    func defaults() throws {
        let body = Array(#"{"audience": {"tokens": ["\#(Self.token.uppercased())"]}, "payload": {"aps": {"alert": "hi"}}}"#.utf8)
        let job = try Self.decoder.decode(body, messageID: "msg-7")
        #expect(job.id == "msg-7")
        #expect(job.app == "demo")
        #expect(job.audience == PushJob.Audience(tokens: [Self.token]))
        #expect(job.pushType == .alert)
        #expect(job.priority == nil)
        #expect(job.results == .all)
        #expect(job.expiration == nil)
        let payload = try JSONSerialization.jsonObject(with: Data(job.payload)) as? [String: Any]
        #expect((payload?["aps"] as? [String: Any])?["alert"] as? String == "hi")
        #expect(UUID(uuidString: try Self.decoder.decode(body).id) != nil)
    }

    @Test("every option is read")
    func everything() throws {
        let enqueued = Date(timeIntervalSince1970: 1_700_000_000)
        let body = Array("""
            {"id": "job-1", "app": "demo", "audience": {"tokens": ["\(Self.token)"], "users": ["u-1"], "groups": ["g"]},
             "type": "grades", "subtype": "final-grade", "payload": {"aps": {"content-available": 1}},
             "push_type": "background", "priority": 5, "expiration": {"after_seconds": 600}, "collapse_id": "c",
             "topic": "com.example.app", "results": "failures", "reply_to": "my.results"}
            """.utf8)
        let job = try Self.decoder.decode(body, messageID: "ignored", enqueuedAt: enqueued)
        #expect(job.id == "job-1")
        #expect(job.audience.users == ["u-1"] && job.audience.groups == ["g"])
        #expect(job.type == "grades" && job.subtype == "final-grade")
        #expect(job.pushType == .background && job.priority == .conservePower)
        #expect(job.expiration?.deadline == enqueued.addingTimeInterval(600))
        #expect(job.collapseID == "c" && job.topic == "com.example.app")
        #expect(job.results == .failures && job.replyTo == "my.results")
    }

    @Test("an app's default_expiration applies to its jobs that name none; a job's own expiration wins")
    func defaultExpiration() throws {
        let decoder = JobDecoder(apps: ["demo": "com.example.app", "rides": "com.example.rides", "news": "com.example.news"],
                                 defaultExpirations: ["demo": .immediate, "rides": .afterSeconds(120)])
        let enqueued = Date(timeIntervalSince1970: 1_800_000_000)
        func expiration(_ app: String, _ extra: String = "") throws -> APNsExpiration? {
            try decoder.decode(Array(#"{"app": "\#(app)", "audience": {"tokens": []}, "payload": {"aps": {}}\#(extra)}"#.utf8), enqueuedAt: enqueued).expiration
        }
        #expect(try expiration("demo") == .immediately)
        #expect(try expiration("rides")?.deadline == enqueued.addingTimeInterval(120))
        #expect(try expiration("news") == nil)
        #expect(try expiration("demo", #", "expiration": {"after_seconds": 60}"#)?.deadline == enqueued.addingTimeInterval(60))
        #expect(try expiration("rides", #", "expiration": "immediate""#) == .immediately)
    }

    @Test("results: batched is a mode; an app's default_results applies to its jobs that name none; an unknown mode names the field and the modes")
    func resultsModes() throws {
        let decoder = JobDecoder(apps: ["demo": "com.example.app", "news": "com.example.news"], defaultResults: ["demo": .batched])
        func results(_ app: String, _ extra: String = "") throws(JobError) -> PushJob.ResultsMode {
            try decoder.decode(Array(#"{"app": "\#(app)", "audience": {"tokens": []}, "payload": {"aps": {}}\#(extra)}"#.utf8)).results
        }
        #expect(try results("demo") == .batched)
        #expect(try results("news") == .all)
        #expect(try results("news", #", "results": "batched""#) == .batched)
        #expect(try results("demo", #", "results": "failures""#) == .failures)
        #expect(throws: JobError(.invalidField, field: "results", "results 'packed' is not all, batched, failures or none")) {
            try results("demo", #", "results": "packed""#)
        }
    }

    @Test("expiration: immediate, Unix seconds and RFC 3339")
    func expirations() throws {
        func expiration(_ json: String) throws -> APNsExpiration? {
            try Self.decoder.decode(Array(#"{"audience": {"tokens": []}, "payload": {"aps": {}}, "expiration": \#(json)}"#.utf8)).expiration
        }
        #expect(try expiration(#""immediate""#) == .immediately)
        #expect(try expiration("1900000000") == .at(Date(timeIntervalSince1970: 1_900_000_000)))
        #expect(try expiration(#""2030-03-17T10:00:00Z""#)?.deadline == ISO8601DateFormatter().date(from: "2030-03-17T10:00:00Z"))
    }

    @Test("expiration 0 means immediately, as in APNs' header, not a moment in 1970")
    func expirationZero() throws {
        let job = try Self.decoder.decode(Array(#"{"audience": {"tokens": []}, "payload": {"aps": {}}, "expiration": 0}"#.utf8))
        #expect(job.expiration == .immediately)
        #expect(job.expiration?.hasPassed() == false)
        #expect(job.expiration?.headerValue == "0")
    }

    @Test("RFC 3339 times with fractional seconds and offsets, as the schema allows")
    func fractionalSeconds() throws {
        func deadline(_ text: String) throws -> Date? {
            try Self.decoder.decode(Array(#"{"audience": {"tokens": []}, "payload": {"aps": {}}, "expiration": "\#(text)"}"#.utf8)).expiration?.deadline
        }
        #expect(try deadline("2026-11-22T10:00:00.5Z") == Date(timeIntervalSince1970: 1_795_341_600.5))
        #expect(try deadline("2026-11-22T11:00:00.250+01:00") == Date(timeIntervalSince1970: 1_795_341_600.25))
        #expect(try deadline("2026-11-22T10:00:00Z") == Date(timeIntervalSince1970: 1_795_341_600))
        #expect(throws: JobError.self) { try deadline("2026-11-22 10:00") }
    }

    @Test("a push type that needs a topic suffix is checked against the app's topic when the job names none")
    func pushTypeAgainstAppTopic() throws {
        func decode(_ decoder: JobDecoder, _ extra: String) throws(JobError) -> PushJob {
            try decoder.decode(Array(#"{"audience": {"tokens": ["\#(Self.token)"]}, "payload": {"aps": {}}\#(extra)}"#.utf8))
        }
        do {
            _ = try decode(Self.decoder, #", "push_type": "voip""#)
            Issue.record("a voip job with no topic for an app whose topic has no .voip was accepted")
        } catch {
            #expect(error.code == .invalidField && error.field == "push_type")
            #expect(error.message.contains("'.voip'") && error.message.contains("com.example.app"), "\(error.message)")
        }
        #expect(try decode(Self.decoder, #", "push_type": "voip", "topic": "com.example.app.voip""#).topic == "com.example.app.voip")
        let voipApp = JobDecoder(apps: ["calls": "com.example.calls.voip"])
        #expect(try decode(voipApp, #", "push_type": "voip""#).pushType == .voip)
        #expect(throws: JobError.self) { try decode(voipApp, #", "push_type": "liveactivity""#) }
    }

    @Test("an empty tokens list is a valid job with no recipients")
    func noRecipients() throws {
        let job = try Self.decoder.decode(Array(#"{"audience": {"tokens": []}, "payload": {"aps": {}}}"#.utf8))
        #expect(job.audience == PushJob.Audience())
    }

    @Test("with several apps, app is required")
    func appRequired() {
        let decoder = JobDecoder(apps: ["a": "com.example.a", "b": "com.example.b"])
        #expect(throws: JobError(.unknownApp, field: "app", "app is required when several apps are configured (a, b)")) {
            try decoder.decode(Array(#"{"audience": {"tokens": []}, "payload": {"aps": {}}}"#.utf8))
        }
    }
}
