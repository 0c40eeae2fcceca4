import AMQP
import APNs
import APNsHTTP2
import Foundation
import Logging
import PushWorker
import SQLiteStores
import Stores
import Synchronization
import TestSupport
import Testing

/// The composition root, built as `pushworker run` builds it but with scripted APNs parts and a
/// recording publisher: what is shared (one provider-token source per key, one admission per
/// app for both lanes) and what each service is given.
@Suite("The worker's assembly")
struct WorkerAssemblyTests {
    /// Records the client configuration each part was made with, and answers channel requests.
    final class ScriptedParts: Sendable {
        let made = Mutex<[(part: String, app: String, source: ProviderTokenSource?, sender: ScriptedSender?)]>([])

        var apns: APNsParts {
            APNsParts(
                sender: { configuration, _ in
                    let sender = ScriptedSender()
                    self.made.withLock { $0.append(("sender", configuration.name, Self.source(configuration), sender)) }
                    return sender
                },
                channels: { configuration in
                    self.made.withLock { $0.append(("channels", configuration.name, Self.source(configuration), nil)) }
                    return ScriptedChannels()
                })
        }

        static func source(_ configuration: APNsClientConfiguration) -> ProviderTokenSource? {
            if case .token(let source) = configuration.authentication { return source }
            return nil
        }

        func sender(of app: String) -> ScriptedSender? { made.withLock { $0.first { $0.part == "sender" && $0.app == app }?.sender } }
    }

    /// Channel management that knows one channel.
    struct ScriptedChannels: ChannelManaging {
        func create(bundleID: String, storagePolicy: APNsChannelStoragePolicy, requestID: UUID?) async throws(APNsChannelError) -> APNsChannel {
            APNsChannel(id: "Y2hhbm5lbA==", storagePolicy: storagePolicy, requestID: "r-1")
        }
        func channel(bundleID: String, id: String) async throws(APNsChannelError) -> APNsChannel {
            throw .rejected(status: 400, reason: .channelNotRegistered, requestID: nil)
        }
        func channels(bundleID: String) async throws(APNsChannelError) -> [String] { ["Y2hhbm5lbA=="] }
        func delete(bundleID: String, id: String) async throws(APNsChannelError) {}
        func shutdown() {}
    }

    static func temporaryFile(_ text: String, suffix: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("assembly-\(UUID().uuidString.prefix(8))\(suffix)")
        try Data(text.utf8).write(to: url)
        return url.path
    }

    /// Three apps: news and sport sign with one key, chat with another (weight 3).
    static func plan(share: Bool = true) throws -> WorkerPlan {
        let first = try temporaryFile(try TestKeys.newP8(), suffix: ".p8")
        let second = try temporaryFile(try TestKeys.newP8(), suffix: ".p8")
        let yaml = """
            metrics_address: null
            share_provider_tokens: \(share)
            queues: {jobs: t.jobs, results: t.results}
            apps:
              - {name: news, topic: com.example.news, environment: sandbox, max_in_flight: 40, token: {key_file: \(first), key_id: ABC123DEFG, team_id: DEF123GHIJ}}
              - {name: sport, topic: com.example.sport.push-type.liveactivity, environment: sandbox, token: {key_file: \(first), key_id: ABC123DEFG, team_id: DEF123GHIJ}}
              - {name: chat, topic: com.example.chat, environment: sandbox, weight: 3, token: {key_file: \(second), key_id: XYZ987WVUT, team_id: DEF123GHIJ}}
            """
        let file = try temporaryFile(yaml, suffix: ".yaml")
        return try WorkerPlan(try PushWorkerConfiguration.parse(yaml, file: file), file: file, environment: [:])
    }

    @Test("one provider-token source per key, shared by an app's sender and its channel manager and by the apps on the key; the fleet agrees on each")
    func oneSourcePerKey() throws {
        let parts = ScriptedParts()
        let assembly = WorkerAssembly(try Self.plan(), apns: parts.apns, logger: Logger(label: "test.assembly"))
        defer { assembly.shutdown() }
        let made = parts.made.withLock { $0 }
        #expect(made.count == 6, "a sender and a channel manager per app")
        let sources = Dictionary(grouping: made, by: \.app).mapValues { Set($0.compactMap(\.source).map(ObjectIdentifier.init)) }
        #expect(sources.values.allSatisfy { $0.count == 1 }, "an app's sender and channel manager share its source")
        #expect(sources["news"] == sources["sport"], "one key, one source")
        #expect(sources["news"] != sources["chat"])
        #expect(assembly.tokenSources.all.count == 2)
        #expect(Set(assembly.tokenSources.all.map(ObjectIdentifier.init)) == Set(sources.values.flatMap { $0 }))
    }

    @Test("the now lane consumes the jobs and due queues, the bulk lane each app's bulk queue by its weight; the broker plan declares every bulk queue; an admission per app")
    func lanesAndTopology() throws {
        let plan = try Self.plan()
        let assembly = WorkerAssembly(plan, apns: ScriptedParts().apns, logger: Logger(label: "test.assembly"))
        defer { assembly.shutdown() }
        let lanes = assembly.lanes
        #expect(lanes.map(\.lane) == [.now, .bulk])
        #expect(lanes[0].queues.map(\.name) == ["t.jobs", "t.jobs.due"] && lanes[0].queues.map(\.prefetch) == [64, 64])
        #expect(lanes[0].bodyBudget?.limit == 8 << 20 && lanes[1].bodyBudget == nil, "large bodies take turns in the now lane only")
        #expect(lanes[1].queues.map(\.name) == ["t.jobs.bulk.news", "t.jobs.bulk.sport", "t.jobs.bulk.chat"])
        #expect(lanes[1].queues.map(\.prefetch) == [4, 4, 12], "amqp.prefetch × weight")
        let declared = Set(plan.broker.amqp.topology.queues.map(\.name))
        #expect(declared.isSuperset(of: ["t.jobs", "t.jobs.due", "t.results", "t.jobs.bulk.news", "t.jobs.bulk.sport", "t.jobs.bulk.chat"]))
        #expect(assembly.apps.map(\.plan.maxInFlight) == [40, AppConfiguration.defaultMaxInFlight, AppConfiguration.defaultMaxInFlight])
        #expect(assembly.apps.map(\.plan.bundleID) == ["com.example.news", "com.example.sport", "com.example.chat"])
    }

    @Test("a job through the assembled now lane reaches its app's sender and its results the publisher")
    func jobThroughTheAssembly() async throws {
        let parts = ScriptedParts()
        let assembly = WorkerAssembly(try Self.plan(), apns: parts.apns, logger: Logger(label: "test.assembly"))
        defer { assembly.shutdown() }
        let publisher = RecordingPublisher(queues: ["t.results"])
        let token = TestDeviceTokens.hex(1, series: 0xA55E)
        let job = #"{"id": "j-1", "app": "chat", "audience": {"tokens": ["\#(token)"]}, "payload": {"aps": {"alert": "hi"}}}"#
        let settlement = await assembly.pipeline(.now, publisher: publisher).run(JobDelivery(body: Array(job.utf8), properties: AMQPProperties(messageID: "m")))
        #expect(settlement == .acknowledge)
        #expect(parts.sender(of: "chat")?.sent.map(\.deviceToken) == [token])
        #expect(parts.sender(of: "news")?.sent.isEmpty == true)
        #expect(try publisher.results(to: "t.results").map(\.outcome) == [.delivered])
        #expect(try publisher.summaries(to: "t.results").first?.jobID == "j-1")
    }

    @Test("the assembled registry service carries channel requests to the app's channel manager; with share_provider_tokens and without")
    func channelRequests() async throws {
        let logger = Logger(label: "test.assembly")
        for share in [false, true] {
            let store = try SQLiteRegistryStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("assembly-\(UUID().uuidString.prefix(8)).db").path)
            let assembly = WorkerAssembly(try Self.plan(share: share), apns: ScriptedParts().apns, registry: RegistryResolver(store: store, logger: logger), logger: logger)
            defer { assembly.shutdown() }
            let handler = try #require(assembly.registryService?.handler)
            let publisher = RecordingPublisher(queues: ["replies"])
            let settlement = await handler.handle(
                Array(#"{"command": "create_channel", "app": "sport"}"#.utf8), properties: AMQPProperties(replyTo: "replies", messageID: "c-1"), via: publisher)
            #expect(settlement == .acknowledge)
            let reply = try #require(publisher.messages(to: "replies").first)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any])
            #expect(object["ok"] as? Bool == true && (object["channel"] as? [String: Any])?["id"] as? String == "Y2hhbm5lbA==", "\(object)")
        }
        // Without a registry there is no registry service.
        let bare = WorkerAssembly(try Self.plan(), apns: ScriptedParts().apns, logger: logger)
        defer { bare.shutdown() }
        #expect(bare.registryService == nil)
        #expect(bare.services.count == 1, "the worker alone")
    }
}
