import Foundation
import Testing

@testable import PushWorker

@Suite("ResultBatch: a batched job's results packed under a size bound")
struct ResultBatchTests {
    static func result(_ index: Int) -> PushResult {
        PushResult(
            jobID: "j\"1", token: String(format: "%064x", index), user: index % 3 == 0 ? nil : "u-\(index)", app: "demo",
            outcome: index % 5 == 0 ? .rejected : .delivered, status: index % 5 == 0 ? 400 : 200, apnsID: "id-\(index)",
            reason: index % 5 == 0 ? "BadDeviceToken" : nil, attempts: 1)
    }

    @Test("results added from many tasks at once come out each exactly once, in messages that stay under the bound (plus one result) and are JSON with the job, app and chunk")
    func bounded() async throws {
        let batch = ResultBatch(jobID: "j\"1", app: "demo", chunk: "2/5", maximumBytes: 10_000)
        let collected = await withTaskGroup(of: ([ResultBatch.Message], [String: Int64]).self) { group in
            for task in 0..<8 {
                group.addTask {
                    var full: [ResultBatch.Message] = [], went: [String: Int64] = [:]
                    for index in 0..<250 {
                        let result = Self.result(task * 250 + index)
                        let added = batch.add(result)
                        went[result.token] = added.message
                        if let message = added.full { full.append(message) }
                    }
                    return (full, went)
                }
            }
            var all: [ResultBatch.Message] = [], went: [String: Int64] = [:]
            for await (messages, ids) in group {
                all += messages
                went.merge(ids) { $1 }
            }
            return (all, went)
        }
        let messages = collected.0 + [try #require(batch.drain())]
        #expect(batch.drain() == nil)
        // Each result's record names the message that carries it; no two messages share an id.
        #expect(Set(messages.map(\.id)).count == messages.count)
        var tokens: [String] = []
        let single = Self.result(0).json.count
        for message in messages {
            #expect(message.body.count < 10_000 + 2 * single + 100)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(message.body)) as? [String: Any])
            #expect(object["job_id"] as? String == "j\"1" && object["app"] as? String == "demo" && object["chunk"] as? String == "2/5")
            let results = try #require(object["results"] as? [Any])
            #expect(results.count == message.count)
            for entry in results {
                let result = try JSONDecoder().decode(PushResult.self, from: JSONSerialization.data(withJSONObject: entry))
                #expect(result == Self.result(Int(result.token, radix: 16)!))
                #expect(collected.1[result.token] == message.id, "the message id given for \(result.token)")
                tokens.append(result.token)
            }
        }
        #expect(tokens.count == 2000 && Set(tokens).count == 2000)
        #expect(messages.count > 40, "10 kB messages of ~270-byte results: \(messages.count)")
    }

    @Test("a whole job's batch says chunk null; an empty batch drains nothing")
    func whole() throws {
        let batch = ResultBatch(jobID: "j", app: "demo", chunk: nil)
        #expect(batch.drain() == nil)
        #expect(batch.add(Self.result(1)).full == nil)
        let message = try #require(batch.drain())
        let object = try #require(try JSONSerialization.jsonObject(with: Data(message.body)) as? [String: Any])
        #expect(object["chunk"] is NSNull && (object["results"] as? [Any])?.count == 1)
    }

    @Test("a result's body reads back as the same result, whatever its strings hold (quotes, backslashes, control characters, non-ASCII)")
    func resultBody() throws {
        let odd = "a\"b\\c\n\t\u{01}é€😀/"
        let results = [
            PushResult(jobID: odd, token: "ab", user: odd, app: "demo", outcome: .failed, reason: odd, attempts: 3),
            PushResult(jobID: "j", token: "ab", app: "demo", outcome: .rejected, status: 410, apnsID: "A-1", apnsUniqueID: "u", reason: "Unregistered",
                       timestamp: 1_700_000_000_123, attempts: 1),
        ]
        for result in results {
            #expect(try JSONDecoder().decode(PushResult.self, from: Data(result.json)) == result)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(result.json)) as? [String: Any])
            #expect(object.count == 11)
        }
    }
}

extension ResultBatchTests {
    @Test("a message names the devices whose results it publishes again from the ledger, whose records it settles once confirmed")
    func answers() throws {
        let batch = ResultBatch(jobID: "j", app: "demo", chunk: "1/2")
        let fresh = batch.add(Self.result(1)).message
        #expect(batch.add(Self.result(2), answering: true).message == fresh)
        _ = batch.add(Self.result(3), answering: true)
        let message = try #require(batch.drain())
        #expect(message.id == fresh && message.answers == [Self.result(2).token, Self.result(3).token] && message.count == 3)
        // The next message starts clean, with an id of its own.
        let next = batch.add(Self.result(4)).message
        #expect(next != fresh)
        #expect(try #require(batch.drain()).answers.isEmpty)
    }
}
