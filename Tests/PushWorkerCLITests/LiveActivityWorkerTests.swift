import AMQP
import Foundation
import MockAPNs
import PushWorker
import Stores
import TestSupport
import Testing

/// Live Activities end to end, as a backend meets them: tokens registered over the broker, a
/// start to a group, an update and an end to an activity, a 410 that removes an activity token,
/// and broadcast channels made with registry commands and with `pushworker channels`, through the
/// worker process, RabbitMQ and the mock's HTTP/2 stack (both transports: the test command runs
/// this suite again on curl).
@Suite("pushworker run: Live Activities and broadcast channels", .usesBroker)
struct LiveActivityWorkerTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0x1A_0000) }

    static func aps(_ payload: [UInt8]) throws -> [String: Any] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        return try #require(object["aps"] as? [String: Any])
    }

    @Test(
        "a start to a group reaches the members' push-to-start tokens (not their devices), filtered by preferences; an update and an end reach an activity's tokens; a 410 removes the activity token",
        arguments: [RegistryWorkerTests.Kind.sqlite, .postgres])
    func startUpdateEnd(_ kind: RegistryWorkerTests.Kind) async throws {
        let (store, registry) = try await kind.make()
        let running = try await RegistryWorkerTests.Running.start(
            registry: registry, faults: [MockAPNsFault(.reject(.unregistered), tokens: [Self.token(22)])])
        let (t1, t11, t12, t13) = (Self.token(1), Self.token(11), Self.token(12), Self.token(13))
        try await running.apply([
            #"{"command": "register_device", "app": "demo", "token": "\#(t1)", "user": "u-1"}"#,
            #"{"command": "register_push_to_start_token", "app": "demo", "token": "\#(t11)", "user": "u-1"}"#,
            #"{"command": "register_push_to_start_token", "app": "demo", "token": "\#(t12)", "user": "u-2"}"#,
            #"{"command": "register_push_to_start_token", "app": "demo", "token": "\#(t13)", "user": "u-3"}"#,
            #"{"command": "add_to_group", "user": "u-1", "group": "fans"}"#,
            #"{"command": "add_to_group", "user": "u-2", "group": "fans"}"#,
            #"{"command": "add_to_group", "user": "u-3", "group": "fans"}"#,
            #"{"command": "set_preferences", "user": "u-3", "app": "demo", "blacklist": {"scores": []}}"#,
        ])

        let started = try await running.job(#"""
            {"id": "start", "audience": {"groups": ["fans"]}, "type": "scores",
             "live_activity": {"event": "start", "attributes_type": "MatchAttributes", "attributes": {"home": "A", "away": "B"},
               "content_state": {"score": "0-0"}, "alert": {"title": "Kick-off", "body": "A v B"}}}
            """#, devices: 3)
        #expect(started.mapValues(\.outcome) == [t11: .delivered, t12: .delivered, t13: .filtered], "the device of u-1 is not a push-to-start token")
        let starts = running.base.mock.recorded.filter { [t11, t12].contains($0.token) }
        #expect(starts.count == 2 && !running.base.mock.recorded.contains { $0.token == t1 })
        for record in starts {
            #expect(record.pushType == "liveactivity" && record.topic == "\(MockAPNsFixture.topic).push-type.liveactivity" && record.priority == "10")
            let aps = try Self.aps(record.payload)
            #expect(aps["event"] as? String == "start" && aps["attributes-type"] as? String == "MatchAttributes" && aps["timestamp"] is NSNumber)
        }

        let (t21, t22, t23) = (Self.token(21), Self.token(22), Self.token(23))
        try await running.apply([
            #"{"command": "register_activity_token", "app": "demo", "activity": "match-42", "token": "\#(t21)", "user": "u-1"}"#,
            #"{"command": "register_activity_token", "app": "demo", "activity": "match-42", "token": "\#(t22)", "user": "u-2"}"#,
            #"{"command": "register_activity_token", "app": "demo", "activity": "match-42", "token": "\#(t23)"}"#,
            #"{"command": "register_activity_token", "app": "demo", "activity": "match-7", "token": "\#(Self.token(24))"}"#,
        ])
        let updated = try await running.job(#"""
            {"id": "goal", "audience": {"activity": "match-42"}, "live_activity": {"event": "update", "content_state": {"score": "1-0"}}}
            """#, devices: 3)
        #expect(updated.mapValues(\.outcome) == [t21: .delivered, t22: .rejected, t23: .delivered], "match-7's token is not match-42's")
        #expect(updated[t22]?.reason == "Unregistered")
        #expect(running.base.mock.recorded.first { $0.token == t21 && $0.priority == "5" } != nil, "an update goes at 5")
        // The 410 removed the activity token where it was registered; the others stay.
        #expect(try await store.device(app: "demo#activity:match-42", token: t22) == nil)
        #expect(try await store.device(app: "demo#activity:match-42", token: t21) != nil)

        let ended = try await running.job(#"""
            {"id": "end", "audience": {"activity": "match-42"}, "live_activity": {"event": "end", "dismissal_date": 1900000000}}
            """#, devices: 2)
        #expect(Set(ended.keys) == [t21, t23])
        let end = try #require(running.base.mock.recorded.last { $0.token == t23 })
        #expect(try Self.aps(end.payload)["event"] as? String == "end")
        #expect((try Self.aps(end.payload)["dismissal-date"] as? NSNumber)?.intValue == 1_900_000_000)

        try await running.apply([#"{"command": "end_activity", "app": "demo", "activity": "match-42"}"#])
        #expect(try await store.device(app: "demo#activity:match-42", token: t21) == nil)
        #expect(try await store.device(app: "demo#activity:match-7", token: Self.token(24)) != nil)
        try await running.stop()
    }

    @Test("create_channel on the registry queue answers the channel id; a broadcast job is one request and one result naming the channel and APNs' request id; a deleted channel's broadcast is rejected with APNs' reason; one provider token serves pushes and channel management")
    func channels() async throws {
        let (_, registry) = try await RegistryWorkerTests.Kind.sqlite.make()
        let running = try await RegistryWorkerTests.Running.start(registry: registry)
        let created = try await running.send(#"{"command": "create_channel", "app": "demo", "message_storage_policy": 1}"#, id: "create-1")
        #expect(created["ok"] as? Bool == true, "\(created)")
        let channel = try #require((created["channel"] as? [String: Any])?["id"] as? String, "\(created)")
        let listed = try await running.send(#"{"command": "list_channels", "app": "demo"}"#, id: "list-1")
        #expect((listed["channels"] as? [String]) == [channel], "\(listed)")
        let shown = try await running.send(#"{"command": "show_channel", "app": "demo", "channel": "\#(channel)"}"#, id: "show-1")
        #expect((shown["channel"] as? [String: Any])?["message_storage_policy"] as? Int == 1, "\(shown)")

        let broadcast = #"{"id": "b-1", "audience": {"channel": "\#(channel)"}, "live_activity": {"event": "update", "content_state": {"score": "1-1"}}}"#
        let first = try #require(try await running.job(broadcast, devices: 1)[""])
        #expect(first.outcome == .delivered && first.status == 200 && first.channel == channel && first.attempts == 1)
        #expect(first.requestID?.isEmpty == false)
        let summary = try await running.results.next(within: .seconds(30))
        try await summary.ack()
        guard case .summary(let counted) = try Reply(summary) else { throw TestFailure("expected the summary") }
        #expect(counted.devices == 1 && counted.outcomes == [.delivered: 1])
        let sent = running.base.mock.broadcasts
        #expect(sent.count == 1, "one request for the whole channel")
        #expect(sent.first?.channelID == channel && sent.first?.bundleID == MockAPNsFixture.topic && sent.first?.requestID == first.requestID)
        #expect(sent.first?.pushType == "liveactivity" && sent.first?.priority == "5")
        #expect(try Self.aps(sent.first?.payload ?? [])["event"] as? String == "update")

        // APNs' trouble is retried in the worker: a 429, then delivered on the second attempt.
        running.base.mock.setFaults([MockAPNsFault(.reject(.tooManyRequests), channels: [channel], times: 1)])
        let retried = try #require(try await running.job(broadcast.replacingOccurrences(of: "b-1", with: "b-429"), devices: 1)[""])
        #expect(retried.outcome == .delivered && retried.attempts == 2, "\(retried)")
        _ = try await running.results.next(within: .seconds(30)).ack()
        // Past its expiration: not sent, outcome expired. With results: failures, a delivered
        // broadcast publishes only its summary.
        let before = running.base.mock.broadcasts.count
        let expired = try #require(try await running.job(
            #"{"id": "b-old", "expiration": 1700000000, "audience": {"channel": "\#(channel)"}, "live_activity": {"event": "end"}}"#, devices: 1)[""])
        #expect(expired.outcome == .expired && expired.attempts == 0 && expired.status == nil, "\(expired)")
        _ = try await running.results.next(within: .seconds(30)).ack()
        #expect(running.base.mock.broadcasts.count == before)
        try await running.publisher.publish(.toQueue("\(running.setup.prefix).jobs", body: Array(
            #"{"id": "b-quiet", "results": "failures", "audience": {"channel": "\#(channel)"}, "live_activity": {"event": "update", "content_state": {}}}"#.utf8)))
        let quiet = try await running.results.next(within: .seconds(30))
        try await quiet.ack()
        guard case .summary(let quietSummary) = try Reply(quiet) else { throw TestFailure("a delivered broadcast with results: failures published a result") }
        #expect(quietSummary.jobID == "b-quiet" && quietSummary.outcomes == [.delivered: 1])

        let deleted = try await running.send(#"{"command": "delete_channel", "app": "demo", "channel": "\#(channel)"}"#, id: "delete-1")
        #expect(deleted["ok"] as? Bool == true, "\(deleted)")
        let late = try #require(try await running.job(broadcast.replacingOccurrences(of: "b-1", with: "b-2"), devices: 1)[""])
        #expect(late.outcome == .rejected && late.reason == "ChannelNotRegistered" && late.channel == channel, "\(late)")
        _ = try await running.results.next(within: .seconds(30)).ack()

        // APNs' refusal of a channel request is answered with its reason, naming the field.
        let gone = try await running.send(#"{"command": "show_channel", "app": "demo", "channel": "\#(channel)"}"#, id: "show-2")
        let error = try #require(gone["error"] as? [String: Any], "\(gone)")
        #expect(gone["ok"] as? Bool == false && error["code"] as? String == "apns_rejected" && error["field"] as? String == "channel")
        #expect((error["message"] as? String)?.contains("ChannelNotRegistered") == true, "\(error)")
        let bad = try await running.send(#"{"command": "create_channel", "app": "demo", "message_storage_policy": 3}"#, id: "create-2")
        #expect((bad["error"] as? [String: Any])?["field"] as? String == "message_storage_policy", "\(bad)")
        // pushworker channels, run beside the worker, presents the fleet's token too.
        let config = ["--config", running.setup.config.path, "--app", "demo"]
        let made = try await Program.running(["channels", "create"] + config, killAfter: .seconds(120))
        #expect(made.status == 0, "\(made.standardError)")
        let madeID = made.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let cliListed = try await Program.running(["channels", "list"] + config, killAfter: .seconds(120))
        #expect(cliListed.standardOutput.contains(madeID), "\(cliListed.standardOutput)\(cliListed.standardError)")
        let cliDeleted = try await Program.running(["channels", "delete"] + config + [madeID], killAfter: .seconds(120))
        #expect(cliDeleted.status == 0, "\(cliDeleted.standardError)")
        // Channel management, from the worker and from the command line, sent the pushes'
        // provider token: one token for the key, not one per caller.
        #expect(running.base.mock.providerTokens.count == 1, "\(running.base.mock.providerTokens.count) provider tokens for one key")
        try await running.stop()
    }

    @Test("pushworker channels create, list, show and delete an app's channels on the management API; APNs' refusal exits 1 naming its reason")
    func command() async throws {
        let setup = try await WorkerProcessTests.setUp(faults: [])
        defer { Task { try? await setup.mock.shutdown() } }
        let config = ["--config", setup.config.path, "--app", "demo"]
        let created = try await Program.running(["channels", "create"] + config + ["--storage-policy", "none"], killAfter: .seconds(120))
        #expect(created.status == 0, "\(created.standardError)")
        let channel = created.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(Data(base64Encoded: channel) != nil, "\(created.standardOutput)")
        let listed = try await Program.running(["channels", "list"] + config, killAfter: .seconds(120))
        #expect(listed.standardOutput.split(separator: "\n").map(String.init) == [channel])
        let shown = try await Program.running(["channels", "show"] + config + [channel], killAfter: .seconds(120))
        #expect(shown.standardOutput.contains("storage_policy: none"), "\(shown.standardOutput)")
        let deleted = try await Program.running(["channels", "delete"] + config + [channel], killAfter: .seconds(120))
        #expect(deleted.status == 0, "\(deleted.standardError)")
        let again = try await Program.running(["channels", "show"] + config + [channel], killAfter: .seconds(120))
        #expect(again.status == 1 && again.standardError.contains("ChannelNotRegistered"), "\(again.standardError)")
        let policy = try await Program.running(["channels", "create"] + config + ["--storage-policy", "forever"], killAfter: .seconds(120))
        #expect(policy.status != 0 && policy.standardError.contains("--storage-policy"), "\(policy.standardError)")
    }
}
