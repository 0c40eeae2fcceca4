import Foundation
@testable import PushWorker
import Testing

@Suite("Large jobs read as they arrive")
struct StreamedJobReaderTests {
    /// Feeds a body in pieces of `piece` bytes, as broker frames would come.
    static func read(_ body: [UInt8], piece: Int = 7) -> Result<StreamedJobReader.Outcome, JobError> {
        let reader = StreamedJobReader(bodySize: body.count)
        var start = 0
        while start < body.count {
            let end = min(body.count, start + piece)
            Array(body[start..<end]).withUnsafeBytes { reader.receive(RawSpan(_unsafeBytes: $0)) }
            start = end
        }
        return reader.finish()
    }

    @Test("every corpus job is refused with the same code and field when streamed", arguments: JobDecoderTests.corpus)
    func corpus(_ entry: JobDecoderTests.CorpusEntry) throws {
        let body = Array(try Data(contentsOf: JobDecoderTests.corpusDirectory.appendingPathComponent(entry.file)))
        let error: JobError
        switch Self.read(body) {
        case .failure(let refused):
            error = refused
        case .success(let outcome):
            do {
                let job = try JobDecoderTests.decoder.decode(outcome.skeleton, messageID: "m-1")
                Issue.record("accepted \(entry.file) with \(outcome.tokens.count) streamed tokens: \(job)")
                return
            } catch {
                #expect(error.code.rawValue == entry.code, "\(entry.file): \(error)")
                if !entry.field.isEmpty { #expect(error.field == entry.field, "\(entry.file): \(error)") }
                return
            }
        }
        #expect(error.code.rawValue == entry.code, "\(entry.file): \(error)")
        if !entry.field.isEmpty { #expect(error.field == entry.field, "\(entry.file): \(error)") }
    }

    @Test("tokens are taken out in order, the rest decodes as the same job")
    func valid() throws {
        let tokens = (1...2500).map { String(format: "%064X", $0 % 2000) }
        let object: [String: Any] = [
            "id": "big", "app": "demo", "collapse_id": "c/1", "priority": 5, "expiration": ["after_seconds": 60],
            "audience": ["users": ["u1"], "tokens": tokens], "payload": ["aps": ["alert": "héllo \u{1F600}"], "n": 1.5e3],
        ]
        let body = Array(try JSONSerialization.data(withJSONObject: object))
        let outcome = try Self.read(body, piece: 4096).get()
        #expect(outcome.tokens.count == 2500)
        #expect(outcome.tokens.hex(0..<3) == tokens[0..<3].map { $0.lowercased() })
        #expect(outcome.skeleton.count < 400)

        let enqueued = Date(timeIntervalSince1970: 1_800_000_000)
        let streamed = try JobDecoderTests.decoder.decode(outcome.skeleton, messageID: nil, enqueuedAt: enqueued)
        var whole = try JobDecoderTests.decoder.decode(body, messageID: nil, enqueuedAt: enqueued)
        #expect(streamed.audience.tokens.isEmpty)
        whole.audience.tokens = []
        #expect(streamed == whole)
    }

    @Test("Android tokens are taken out too, each once and in order, the skeleton keeping the first: the job decodes as the same one; a bad one is named by its entry")
    func android() throws {
        let android = (0..<3000).map { "stream\(String(format: "%05d", $0 % 2500))abcdefghijk:APA91bH" + String(repeating: "k7-_Qw", count: 20) }
        let object: [String: Any] = [
            "id": "androids", "app": "demo", "audience": ["tokens": [String(repeating: "ab", count: 32)], "fcm_tokens": android],
            "notification": ["title": "Sale"], "fcm": ["data": ["k": "v"]],
        ]
        let body = Array(try JSONSerialization.data(withJSONObject: object))
        let outcome = try Self.read(body, piece: 4096).get()
        #expect(outcome.android == Array(android.prefix(2500)))
        #expect(outcome.tokens.count == 1 && outcome.skeleton.count < 600, "\(outcome.skeleton.count)")
        let enqueued = Date(timeIntervalSince1970: 1_800_000_000)
        var streamed = try JobDecoderTests.decoder.decode(outcome.skeleton, messageID: nil, enqueuedAt: enqueued)
        #expect(streamed.audience.fcmTokens == [android[0]])
        streamed.audience.fcmTokens = outcome.android
        var whole = try JobDecoderTests.decoder.decode(body, messageID: nil, enqueuedAt: enqueued)
        whole.audience.tokens = []
        #expect(streamed == whole)

        var bad = android
        bad[2_700] = String(repeating: "ab", count: 32)
        let refused = Array(try JSONSerialization.data(withJSONObject: ["audience": ["fcm_tokens": bad], "notification": ["title": "t"]]))
        guard case .failure(let error) = Self.read(refused, piece: 4096) else { Issue.record("accepted"); return }
        #expect(error.code == .invalidToken && error.field == "audience.fcm_tokens[2700]", "\(error)")
    }

    @Test("tokens as apps log them are normalised when streamed too")
    func loggedTokens() throws {
        let tokens = JobDecoderTests.loggedForms
        let body = Array(try JSONSerialization.data(withJSONObject: ["audience": ["tokens": tokens], "payload": ["aps": [:]]]))
        let outcome = try Self.read(body, piece: 64).get()
        #expect(outcome.tokens.hex(0..<tokens.count) == Array(repeating: tokens[0], count: tokens.count))
    }

    @Test("a bad token deep in the list is named by its index; JSON broken after the tokens is invalid_json with its byte")
    func refused() {
        var tokens = (0..<30_000).map { String(format: "%064x", $0) }
        tokens[21_347] = "xyz"
        let body = Array(try! JSONSerialization.data(withJSONObject: ["audience": ["tokens": tokens], "payload": [:]]))
        guard case .failure(let error) = Self.read(body, piece: 131_072) else { Issue.record("accepted"); return }
        #expect(error.code == .invalidToken)
        #expect(error.field == "audience.tokens[21347]")
        // An Android device's token among them: the message says where it goes.
        tokens[21_347] = "cXyZ0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)
        let android = Array(try! JSONSerialization.data(withJSONObject: ["audience": ["tokens": tokens], "payload": [:]]))
        guard case .failure(let misplaced) = Self.read(android, piece: 131_072) else { Issue.record("accepted"); return }
        #expect(misplaced.field == "audience.tokens[21347]" && misplaced.message.contains("name it in audience.fcm_tokens"), "\(misplaced.message)")

        let broken = Array(#"{"audience": {"tokens": ["\#(String(repeating: "ab", count: 32))"]}, "payload": {"aps": {}},}"#.utf8)
        guard case .failure(let syntax) = Self.read(broken) else { Issue.record("accepted"); return }
        #expect(syntax.code == .invalidJSON)
        #expect(syntax.message.contains("at byte \(broken.count - 1)"), "\(syntax.message)")
    }
}
