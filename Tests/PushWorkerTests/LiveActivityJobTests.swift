import APNs
import Foundation
import PushWorker
import Stores
import Testing

@Suite("Live Activity jobs and broadcasts: decoding")
struct LiveActivityJobTests {
    static let decoder = JobDecoder(apps: ["demo": "com.example.app"])
    static let token = String(repeating: "ab", count: 32)
    static let channel = "dHN0LXNyY2gtY2hubA=="
    static let enqueued = Date(timeIntervalSince1970: 1_790_000_000)

    static func decode(_ json: String, chunk: Bool = false) throws(JobError) -> PushJob {
        try decoder.decode(Array(json.utf8), messageID: "m-1", enqueuedAt: enqueued, chunk: chunk)
    }

    static func aps(_ job: PushJob) throws -> [String: Any] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(job.payload)) as? [String: Any])
        return try #require(object["aps"] as? [String: Any])
    }

    @Test("a start to a group builds ActivityKit's aps, sends as liveactivity at 10 to the suffixed topic, and reaches push-to-start tokens")
    func start() throws {
        let job = try Self.decode("""
            {"audience": {"groups": ["fans"]}, "type": "score",
             "live_activity": {"event": "start", "attributes_type": "MatchAttributes", "attributes": {"home": "A", "away": "B"},
               "content_state": {"score": "0-0"}, "alert": {"title": "Kick-off", "body": "A v B"}, "stale_date": "2026-11-25T22:00:00Z",
               "relevance_score": 50, "input_push_token": true},
             "payload": {"match": 42}}
            """)
        #expect(job.pushType == .liveactivity)
        #expect(job.priority == .immediate)
        #expect(job.topic == "com.example.app.push-type.liveactivity")
        #expect(job.liveActivity == .start)
        #expect(job.tokenNamespace == .pushToStart)
        #expect(job.registryApp == "demo#push-to-start")
        let aps = try Self.aps(job)
        #expect(aps["event"] as? String == "start")
        #expect(aps["attributes-type"] as? String == "MatchAttributes")
        #expect((aps["attributes"] as? [String: Any])?["home"] as? String == "A")
        #expect((aps["content-state"] as? [String: Any])?["score"] as? String == "0-0")
        #expect((aps["alert"] as? [String: Any])?["title"] as? String == "Kick-off")
        let stale = try #require(ISO8601DateFormatter().date(from: "2026-11-25T22:00:00Z"))
        #expect((aps["stale-date"] as? NSNumber)?.int64Value == Int64(stale.timeIntervalSince1970))
        #expect((aps["relevance-score"] as? NSNumber)?.intValue == 50)
        #expect((aps["input-push-token"] as? NSNumber)?.intValue == 1)
        // No timestamp named: the enqueue time, so a redelivery is not newer content.
        #expect((aps["timestamp"] as? NSNumber)?.int64Value == 1_790_000_000)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(job.payload)) as? [String: Any])
        #expect(object["match"] as? Int == 42)
    }

    @Test("an update to an activity goes at 5 by default, an end at 10 with its dismissal date; both reach the activity's tokens")
    func updateAndEnd() throws {
        let update = try Self.decode("""
            {"audience": {"activity": "match-42"}, "live_activity": {"event": "update", "content_state": {"score": "1-0"}, "timestamp": 1790000100}}
            """)
        #expect(update.priority == .conservePower)
        #expect(update.tokenNamespace == .activity("match-42"))
        #expect(update.registryApp == "demo#activity:match-42")
        #expect((try Self.aps(update)["timestamp"] as? NSNumber)?.int64Value == 1_790_000_100)
        let end = try Self.decode("""
            {"audience": {"activity": "match-42"}, "priority": 5,
             "live_activity": {"event": "end", "dismissal_date": 1790003600, "content_state": {"score": "2-1"}}}
            """)
        #expect(end.priority == .conservePower)
        let aps = try Self.aps(end)
        #expect((aps["dismissal-date"] as? NSNumber)?.int64Value == 1_790_003_600)
        #expect(aps["event"] as? String == "end")
    }

    @Test("a broadcast: one channel, liveactivity, no collapse id, nothing else in the audience")
    func broadcast() throws {
        let job = try Self.decode("""
            {"audience": {"channel": "\(Self.channel)"}, "live_activity": {"event": "update", "content_state": {"score": "1-1"}}}
            """)
        #expect(job.isBroadcast)
        #expect(job.audience.channel == Self.channel)
        // The audience is the channel alone: its type has no room for devices beside it.
        #expect(job.audience.kind == .channel(Self.channel))
        #expect(job.audience.tokens.isEmpty && job.audience.users.isEmpty && job.audience.activity == nil)
        #expect(try Self.decode(#"{"audience": {"tokens": []}, "payload": {"aps": {"alert": "hi"}}}"#).audience.channel == nil)
        #expect(job.pushType == .liveactivity)
        #expect(job.tokenNamespace == .devices)
    }

    @Test("a chunk job carries the token namespace, so its dead tokens are removed where they were registered")
    func chunkNamespace() throws {
        let job = try Self.decode("""
            {"audience": {"activity": "match-42"}, "live_activity": {"event": "update", "content_state": {"score": "1-0"}}}
            """)
        let body = try job.chunkBody(devices: [Recipient(token: Self.token, user: "u-1")])
        let chunk = try JobDecoder(apps: ["demo": "com.example.app"]).decode(body, chunk: true)
        #expect(chunk.tokenNamespace == .activity("match-42"))
        #expect(chunk.payload == job.payload)
        #expect(chunk.priority == job.priority)
        #expect(chunk.topic == "com.example.app.push-type.liveactivity")
        // A producer cannot name it.
        #expect(throws: JobError.self) {
            try Self.decode(#"{"audience": {"tokens": ["\#(Self.token)"]}, "token_namespace": "push-to-start", "payload": {"aps": {"alert": "x"}}}"#)
        }
    }

    struct Refusal: Sendable, CustomStringConvertible {
        let json: String
        let field: String
        var description: String { field + ": " + json }
    }

    static let refusals: [Refusal] = [
        Refusal(json: #"{"audience": {"groups": ["g"]}, "live_activity": {"content_state": {}}}"#, field: "live_activity.event"),
        Refusal(json: #"{"audience": {"groups": ["g"]}, "live_activity": {"event": "begin", "content_state": {}}}"#, field: "live_activity.event"),
        Refusal(json: #"{"audience": {"groups": ["g"]}, "live_activity": {"event": "start", "content_state": {}, "attributes": {}}}"#, field: "live_activity.attributes_type"),
        Refusal(json: #"{"audience": {"groups": ["g"]}, "live_activity": {"event": "start", "content_state": {}, "attributes_type": "T"}}"#, field: "live_activity.attributes"),
        Refusal(json: #"{"audience": {"groups": ["g"]}, "live_activity": {"event": "start", "attributes_type": "T", "attributes": {}}}"#, field: "live_activity.content_state"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "update"}}"#, field: "live_activity.content_state"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "end", "attributes": {}}}"#, field: "live_activity.attributes"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "update", "content_state": {}, "attributes_type": "T"}}"#, field: "live_activity.attributes_type"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "update", "content_state": {}, "dismissal_date": 1}}"#, field: "live_activity.dismissal_date"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "end", "stale_date": 1}}"#, field: "live_activity.stale_date"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "update", "content_state": {}, "timestamp": "yesterday"}}"#, field: "live_activity.timestamp"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "update", "content_state": {}, "relevance_score": true}}"#, field: "live_activity.relevance_score"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "update", "content_state": [1]}}"#, field: "live_activity.content_state"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "update", "content_state": {}, "alert": "hi"}}"#, field: "live_activity.alert"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "update", "content_state": {}, "alert": {"sound": "x"}}}"#, field: "live_activity.alert.title"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "update", "content_state": {}, "contentState": {}}}"#, field: "live_activity.contentState"),
        Refusal(json: #"{"audience": {"activity": "a"}, "push_type": "alert", "live_activity": {"event": "update", "content_state": {}}}"#, field: "push_type"),
        Refusal(json: #"{"audience": {"activity": "a"}, "priority": 1, "live_activity": {"event": "update", "content_state": {}}}"#, field: "priority"),
        Refusal(json: #"{"audience": {"activity": "a"}, "payload": {"aps": {}}, "live_activity": {"event": "update", "content_state": {}}}"#, field: "payload.aps"),
        Refusal(json: #"{"audience": {"users": ["u"]}, "live_activity": {"event": "update", "content_state": {}}}"#, field: "audience.users"),
        Refusal(json: #"{"audience": {"groups": ["g"]}, "live_activity": {"event": "end"}}"#, field: "audience.groups"),
        Refusal(json: #"{"audience": {"activity": "a"}, "live_activity": {"event": "start", "attributes_type": "T", "attributes": {}, "content_state": {}}}"#, field: "audience.activity"),
        Refusal(json: #"{"audience": {"activity": "a"}, "payload": {"aps": {"alert": "x"}}}"#, field: "audience.activity"),
        Refusal(json: #"{"audience": {"activity": ""}, "live_activity": {"event": "end"}}"#, field: "audience.activity"),
        Refusal(json: #"{"audience": {"channel": "dHN0LXNyY2gtY2hubA==", "tokens": []}, "live_activity": {"event": "end"}}"#, field: "audience.tokens"),
        Refusal(json: #"{"audience": {"channel": "not base64!"}, "live_activity": {"event": "end"}}"#, field: "audience.channel"),
        Refusal(json: #"{"audience": {"channel": "dHN0LXNyY2gtY2hubA=="}, "live_activity": {"event": "start", "attributes_type": "T", "attributes": {}, "content_state": {}}}"#, field: "audience.channel"),
        Refusal(json: #"{"audience": {"channel": "dHN0LXNyY2gtY2hubA=="}, "collapse_id": "c", "live_activity": {"event": "end"}}"#, field: "collapse_id"),
        Refusal(json: #"{"audience": {"groups": ["g"]}, "live_activity": {"event": "start", "attributes_type": "T", "attributes": {}, "content_state": {}, "input_push_token": 1}}"#, field: "live_activity.input_push_token"),
        Refusal(json: #"{"audience": {"groups": ["g"]}, "live_activity": {"event": "start", "attributes_type": "T", "attributes": {}, "content_state": {}, "input_push_channel": "%%"}}"#, field: "live_activity.input_push_channel"),
        Refusal(json: #"{"audience": {"channel": "dHN0LXNyY2gtY2hubA=="}, "push_type": "liveactivity", "payload": {"aps": {"event": "update", "badge": "increment"}}}"#, field: "payload.aps.badge"),
    ]

    @Test("every missing or malformed Live Activity field is refused, naming it", arguments: refusals)
    func refused(_ refusal: Refusal) {
        do {
            let job = try Self.decode(refusal.json)
            Issue.record("accepted: \(job)")
        } catch {
            #expect(error.field == refusal.field, "\(error)")
            #expect(error.message.contains(refusal.field), "\(error.message)")
        }
    }
}
