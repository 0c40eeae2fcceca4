import AMQP
import Foundation
import Logging
import MockAPNs
import PostgresStores
import PushWorker
import SQLiteStores
import Stores
import TestSupport
import Testing

/// A worker with a registry (an SQLite file, or a database on the test PostgreSQL), fed here
/// through a store of the test's own on the same file or database: group jobs resolve to the
/// members' devices, preferences filter, and a 410 removes a device.
@Suite("pushworker run with a registry", .usesBroker)
struct RegistryWorkerTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xE000) }

    enum Kind: String, Sendable, CustomStringConvertible {
        case sqlite, postgres
        var description: String { rawValue }

        /// A new registry, and the `registry:` line of a worker configuration naming it.
        func make() async throws -> (store: any RegistryStore, configuration: String) {
            switch self {
            case .sqlite:
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db").path
                return (try SQLiteRegistryStore(path: file), "registry: {sqlite: \(file)}")
            case .postgres:
                let url = try await TestPostgres.freshDatabase()
                return (try await PostgresRegistryStore(url: url, logger: Logger(label: "test.registry")), "registry: {postgres: \"\(url)\"}")
            }
        }
    }

    /// A worker with a registry, and a producer's side of its queues: commands sent with a
    /// `reply_to` and answered, results and dead letters read.
    struct Running {
        /// The worker and its job queues, as the job contract tests run them.
        let base: JobContractTests.Running
        let answers: AMQPConsumer
        var setup: WorkerProcessTests.Setup { base.setup }
        var worker: RunningProgram { base.worker }
        var publisher: AMQPPublisher { base.publisher }
        var results: AMQPConsumer { base.results }
        var dead: AMQPConsumer { base.dead }

        static func start(registry: String, faults: [MockAPNsFault] = [], appExtra: [String] = []) async throws -> Running {
            let base = try await JobContractTests.Running.start(faults: faults, extra: registry, appExtra: appExtra)
            let replies = "\(base.prefix).replies"
            return Running(base: base, answers: try await TestBroker.consumer(queue: replies, topology: AMQPTopology(queues: [.durable(replies)])))
        }

        /// Closes the test's connections and the mock (the worker is the test's to stop).
        func close() async {
            await answers.close()
            await base.close()
        }

        /// Publishes a command as any producer would and returns its answer.
        func send(_ json: String, id: String) async throws -> [String: Any] {
            try await publisher.publish(AMQPMessage(
                exchange: "\(setup.prefix).push", routingKey: "registry", body: Array(json.utf8),
                properties: AMQPProperties(contentType: "application/json", persistent: true, replyTo: "\(setup.prefix).replies", messageID: id),
                mandatory: true))
            let answer = try await answers.next(within: .seconds(30))
            try await answer.ack()
            #expect(answer.properties.correlationID == id)
            return try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
        }

        /// Each command answered `{"ok": true}`.
        func apply(_ commands: [String]) async throws {
            for (index, command) in commands.enumerated() {
                let reply = try await send(command, id: "cmd-\(index)-\(UUID().uuidString.prefix(6))")
                #expect(reply["ok"] as? Bool == true, "\(command): \(reply)")
            }
        }

        /// Each answered with its error, and dead-lettered with it.
        func refused(_ commands: [(json: String, code: String, field: String)]) async throws {
            for (index, entry) in commands.enumerated() {
                let id = "bad-\(index)-\(UUID().uuidString.prefix(6))"
                let reply = try await send(entry.json, id: id)
                let error = reply["error"] as? [String: Any]
                #expect(reply["ok"] as? Bool == false && error?["code"] as? String == entry.code && error?["field"] as? String == entry.field, "\(entry.json): \(reply)")
                let letter = try await dead.next(within: .seconds(30))
                try await letter.ack()
                #expect(letter.properties.messageID == id && letter.properties.headers?[WireHeader.error]?.stringValue == entry.code)
            }
        }

        /// Publishes a job and returns the results of its `devices` by token (split into chunks
        /// or not: summaries are skipped).
        func job(_ json: String, devices: Int) async throws -> [String: PushResult] {
            try await publisher.publish(.toQueue("\(setup.prefix).jobs", body: Array(json.utf8)))
            var byToken: [String: PushResult] = [:]
            while byToken.count < devices {
                let delivery = try await results.next(within: .seconds(30))
                try await delivery.ack()
                guard case .result(let result) = try Reply(delivery) else { continue }
                #expect(byToken[result.token] == nil, "two results for \(result.token)")
                byToken[result.token] = result
            }
            return byToken
        }

        func stop() async throws {
            await answers.close()
            try await base.stop()
        }
    }

    struct GroupCase: Sendable, CustomStringConvertible {
        let kind: Kind
        let chunkSize: Int?
        var description: String { "\(kind)\(chunkSize.map { ", chunks of \($0)" } ?? "")" }
    }

    @Test(
        "a group job reaches the members' devices once each, filtered by preferences, each result naming its user, in chunk jobs too; a 410 removes the device, one registered again after it is kept",
        arguments: [GroupCase(kind: .sqlite, chunkSize: nil), GroupCase(kind: .sqlite, chunkSize: 2), GroupCase(kind: .postgres, chunkSize: 2)])
    func groupJob(_ setting: GroupCase) async throws {
        let (store, registry) = try await setting.kind.make()
        // u-1: two devices, one of which APNs calls unregistered now; u-2: blacklists grades
        // except final-grade; u-3: whitelists only news; u-4 named as a user and in the group.
        try await store.apply(.registerDevice(app: "demo", token: Self.token(1), user: "u-1"))
        try await store.apply(.registerDevice(app: "demo", token: Self.token(2), user: "u-1"))
        try await store.apply(.registerDevice(app: "demo", token: Self.token(3), user: "u-2"))
        try await store.apply(.registerDevice(app: "demo", token: Self.token(4), user: "u-3"))
        try await store.apply(.registerDevice(app: "demo", token: Self.token(5), user: "u-4"))
        try await store.apply(.registerDevice(app: "other", token: Self.token(6), user: "u-1"))
        // Token 7 is a 410 too, but APNs saw it valid an hour ago and it registered since: kept.
        try await store.apply(.registerDevice(app: "demo", token: Self.token(7), user: "u-4"))
        for user in ["u-1", "u-2", "u-3", "u-4"] { try await store.apply(.addToGroup(user: user, group: "class", createGroup: true)) }
        try await store.apply(.setPreferences(.user("u-2"), NotificationPreferences(blacklist: ["grades": ["final-grade"]])))
        try await store.apply(.setPreferences(.user("u-3"), NotificationPreferences(whitelist: ["news": []])))

        let setup = try await WorkerProcessTests.setUp(
            faults: [MockAPNsFault(.reject(.unregistered), tokens: [Self.token(2)])],
            unregistered: [Self.token(7): Date(timeIntervalSinceNow: -3600)],
            extra: registry + (setting.chunkSize.map { "\nchunk_size: \($0)" } ?? ""))
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let topology = AMQPTopology(queues: [.durable("\(setup.prefix).results")])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(setup.prefix).results", topology: topology)

        /// The job's results, and its summary (the chunks' summaries added up when it was split).
        func run(_ id: String, subtype: String, devices: Int) async throws -> (results: [String: PushResult], summary: JobSummary) {
            // Token 5 is named as well as reached through u-4 and the group: sent once.
            try await publisher.publish(.toQueue("\(setup.prefix).jobs", body: Array(
                #"{"id": "\#(id)", "audience": {"groups": ["class"], "users": ["u-4"], "tokens": ["\#(Self.token(5))"]}, "type": "grades", "subtype": "\#(subtype)", "payload": {"aps": {}}}"#.utf8)))
            var byToken: [String: PushResult] = [:]
            var total = JobSummary(jobID: id, app: "demo", devices: 0, outcomes: [:], durationMilliseconds: 0)
            var chunks: [String?] = []
            while total.devices < devices {
                let delivery = try await results.next(within: .seconds(30))
                try await delivery.ack()
                switch try Reply(delivery) {
                case .result(let result):
                    #expect(byToken[result.token] == nil, "two results for \(result.token)")
                    byToken[result.token] = result
                case .summary(let summary):
                    #expect(summary.error == nil, "\(summary)")
                    total.devices += summary.devices
                    total.removed += summary.removed
                    total.outcomes.merge(summary.outcomes, uniquingKeysWith: +)
                    chunks.append(summary.chunk)
                }
            }
            let expected = setting.chunkSize.map { size in (1...((devices + size - 1) / size)).map { "\($0)/\((devices + size - 1) / size)" } } ?? [nil]
            #expect(chunks.map { $0 ?? "-" }.sorted() == expected.map { $0 ?? "-" }.sorted())
            return (byToken, total)
        }

        let first = try await run("midterm", subtype: "midterm", devices: 6)
        #expect(first.results.mapValues(\.outcome) == [
            Self.token(1): .delivered, Self.token(2): .rejected, Self.token(3): .filtered, Self.token(4): .filtered,
            Self.token(5): .delivered, Self.token(7): .rejected,
        ])
        #expect(first.results.mapValues { $0.user ?? "-" } == [
            Self.token(1): "u-1", Self.token(2): "u-1", Self.token(3): "u-2", Self.token(4): "u-3", Self.token(5): "u-4", Self.token(7): "u-4",
        ])
        #expect(first.summary.devices == 6 && first.summary.outcomes == [.delivered: 2, .rejected: 2, .filtered: 2])
        #expect(first.summary.removed == 1, "token 2 removed, token 7 kept")
        // Requests for 1, 2, 5 and 7; the mock records only those it accepted.
        #expect(setup.mock.requestCount == 4)
        #expect(Set(setup.mock.recorded.map(\.token)) == [Self.token(1), Self.token(5)])

        // The 410 took token 2 out; token 7 stays; final-grade passes u-2's blacklist.
        #expect(try await store.device(app: "demo", token: Self.token(2)) == nil)
        #expect(try await store.device(app: "demo", token: Self.token(7)) != nil)
        let second = try await run("final", subtype: "final-grade", devices: 5)
        #expect(Set(second.results.keys) == [Self.token(1), Self.token(3), Self.token(4), Self.token(5), Self.token(7)])
        #expect(second.results[Self.token(3)]?.outcome == .delivered)
        #expect(second.results[Self.token(4)]?.outcome == .filtered)
        #expect(setup.mock.requestCount == 8, "token 2 is not sent again")
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await results.close()
        await publisher.close()
    }

    @Test("registry commands through RabbitMQ from a plain AMQP client are applied and answered; malformed ones are answered with the error and dead-lettered; the worker keeps serving")
    func commands() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db").path
        let setup = try await WorkerProcessTests.setUp(faults: [], extra: "registry: {sqlite: \(file)}")
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("registry commands consumed")
        let replies = "\(setup.prefix).replies"
        let topology = AMQPTopology(queues: [.durable(replies), .durable("\(setup.prefix).dead", quorum: true)])
        let publisher = try await TestBroker.publisher(topology: topology)
        let answers = try await TestBroker.consumer(queue: replies, topology: topology)
        let dead = try await TestBroker.consumer(queue: "\(setup.prefix).dead", topology: topology)

        /// Publishes a command as any producer would (exchange, routing key, reply_to, message_id)
        /// and returns its reply.
        func send(_ json: String, id: String) async throws -> [String: Any] {
            try await publisher.publish(AMQPMessage(
                exchange: "\(setup.prefix).push", routingKey: "registry", body: Array(json.utf8),
                properties: AMQPProperties(contentType: "application/json", persistent: true, replyTo: replies, messageID: id), mandatory: true))
            let answer = try await answers.next(within: .seconds(30))
            try await answer.ack()
            #expect(answer.properties.correlationID == id)
            return try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
        }

        let valid = [
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(1))", "user": "u-1"}"#,
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(2))"}"#,
            #"{"command": "connect", "app": "demo", "token": "\#(Self.token(2))", "user": "u-2"}"#,
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(3))", "user": "u-3"}"#,
            #"{"command": "disconnect", "app": "demo", "token": "\#(Self.token(3))", "user": "u-3"}"#,
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(4))", "user": "u-1"}"#,
            #"{"command": "unregister_device", "app": "demo", "token": "\#(Self.token(4))"}"#,
            #"{"command": "add_to_group", "user": "u-1", "group": "g"}"#,
            #"{"command": "add_to_group", "user": "u-2", "group": "g", "create_group": false}"#,
            #"{"command": "add_to_group", "user": "u-3", "group": "g"}"#,
            #"{"command": "remove_from_group", "user": "u-3", "group": "g"}"#,
            #"{"command": "set_preferences", "user": "u-2", "whitelist": {}, "blacklist": {"grades": ["final-grade"]}}"#,
            #"{"command": "delete_user", "user": "u-9"}"#,
        ]
        for (index, command) in valid.enumerated() {
            let reply = try await send(command, id: "ok-\(index)")
            #expect(reply["ok"] as? Bool == true, "\(command): \(reply)")
        }
        // Every kind the parser refuses, and one the store refuses.
        let malformed: [(json: String, code: String)] = MalformedRegistryCommand.corpus.map { (json: $0.json, code: $0.code) }
            + [(json: #"{"command": "add_to_group", "user": "u-1", "group": "nope", "create_group": false}"#, code: "unknown_group"),
               // A device no job could reach: the worker serves only "demo".
               (json: #"{"command": "register_device", "app": "elsewhere", "token": "\#(Self.token(8))"}"#, code: "unknown_app"),
               (json: #"{"command": "connect", "app": "elsewhere", "token": "\#(Self.token(8))", "user": "u-1"}"#, code: "unknown_app")]
        #expect(malformed.count > 20)
        for (index, entry) in malformed.enumerated() {
            let reply = try await send(entry.json, id: "bad-\(index)")
            #expect(reply["ok"] as? Bool == false)
            #expect((reply["error"] as? [String: Any])?["code"] as? String == entry.code, "\(entry.json): \(reply)")
            if entry.code == "unknown_app" {
                #expect(((reply["error"] as? [String: Any])?["message"] as? String)?.contains("(configured: demo)") == true, "\(reply)")
            }
            let letter = try await dead.next(within: .seconds(30))
            try await letter.ack()
            #expect(letter.properties.messageID == "bad-\(index)")
            #expect(letter.properties.headers?[WireHeader.error]?.stringValue == entry.code)
        }
        // Still serving, and the state is what the commands said.
        #expect(try await send(#"{"command": "add_to_group", "user": "u-2", "group": "g2"}"#, id: "after")["ok"] as? Bool == true)
        let store = try SQLiteRegistryStore(path: file)
        var members: [RegisteredDevice] = []
        try await store.withAudience(app: "demo", users: [], groups: ["g"]) { audience in try await audience.pages(size: 100) { members += $0 } }
        #expect(members.sorted { $0.token < $1.token }.map { [$0.token, $0.user] } == [[Self.token(1), "u-1"], [Self.token(2), "u-2"]])
        #expect(try await store.device(app: "demo", token: Self.token(3))?.user == nil)
        #expect(try await store.device(app: "demo", token: Self.token(4)) == nil)
        #expect(try await store.device(app: "elsewhere", token: Self.token(8)) == nil)
        #expect(try await store.user("u-2")?.preferences == NotificationPreferences(blacklist: ["grades": ["final-grade"]]))
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await dead.close()
        await answers.close()
        await publisher.close()
    }

    @Test("replace_token and status over the queue, as an app does after a restore: the user's pushes reach the new token, status answers as the CLI prints, bad ones are refused naming the field", arguments: [Kind.sqlite, .postgres])
    func replaceTokenAndStatus(_ kind: Kind) async throws {
        let (store, registry) = try await kind.make()
        let running = try await Running.start(registry: registry)
        func status(_ token: String, _ extra: String = "") async throws -> [String: Any]? {
            let reply = try await running.send(#"{"command": "status", "app": "demo", "token": "\#(token)"\#(extra)}"#, id: "status-\(token.prefix(6))")
            #expect(reply["ok"] as? Bool == true, "\(reply)")
            return reply["status"] as? [String: Any]
        }
        let (old, new) = (Self.token(1), Self.token(2))
        // The new token as the app logged it.
        let logged = "<" + stride(from: 0, to: 64, by: 8).map { new.dropFirst($0).prefix(8).uppercased() }.joined(separator: " ") + ">"
        try await running.apply([
            #"{"command": "register_device", "app": "demo", "token": "\#(old)", "user": "u-1"}"#,
            #"{"command": "add_to_group", "user": "u-1", "group": "class"}"#,
            #"{"command": "set_preferences", "user": "u-1", "blacklist": {"grades": ["final"]}}"#,
        ])
        let before = try #require(try await status(old, #", "type": "grades", "subtype": "midterm""#))
        #expect(before["registered"] as? Bool == true && before["user"] as? String == "u-1" && before["groups"] as? [String] == ["class"])
        #expect(before["reaches"] as? Bool == false && before["type"] as? String == "grades" && before["subtype"] as? String == "midterm")
        // The CLI prints the same answer.
        let printed = try await Program.running(["registry", "status", "--config", running.setup.config.path, "demo", old, "--type", "grades", "--subtype", "midterm", "--json"])
        let cli = try #require(try JSONSerialization.jsonObject(with: Data(printed.standardOutput.utf8)) as? [String: Any], "\(printed.standardError)")
        func canonical(_ object: [String: Any]) throws -> String {
            String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
        }
        #expect(try canonical(cli) == canonical(before))

        // Sent twice, as a retrying app would.
        try await running.apply(Array(repeating: #"{"command": "replace_token", "app": "demo", "old": "\#(old)", "new": "\#(logged)"}"#, count: 2))
        #expect(try await status(old)?["registered"] as? Bool == false)
        let after = try #require(try await status(new))
        #expect(after["registered"] as? Bool == true && after["user"] as? String == "u-1" && after["groups"] as? [String] == ["class"])
        #expect(after["reaches"] is NSNull && after["token"] as? String == new)
        #expect(try await store.device(app: "demo", token: old) == nil)

        // A push to the group reaches the new token only, named with its user.
        let results = try await running.job(#"{"id": "after-restore", "audience": {"groups": ["class"]}, "payload": {"aps": {"alert": "hi"}}}"#, devices: 1)
        #expect(results.mapValues(\.outcome) == [new: .delivered] && results[new]?.user == "u-1")
        #expect(running.setup.mock.recorded.map(\.token) == [new])

        try await running.refused([
            (#"{"command": "replace_token", "app": "demo", "old": "\#(old)"}"#, "missing_field", "new"),
            (#"{"command": "replace_token", "app": "elsewhere", "old": "\#(old)", "new": "\#(new)"}"#, "unknown_app", "app"),
            (#"{"command": "status", "app": "demo", "token": "nothex"}"#, "invalid_field", "token"),
        ])
        #expect(try await store.device(app: "demo", token: new)?.user == "u-1", "refusals changed nothing")
        try await running.stop()
    }

    @Test("preferences edited over the queue one type at a time, per app and per device, filter a group job as jobs.md's table says; get_preferences reads them back", arguments: [Kind.sqlite, .postgres])
    func scopedPreferences(_ kind: Kind) async throws {
        let (_, registry) = try await kind.make()
        let running = try await Running.start(registry: registry)
        // u-1: app-wide blacklist of grades, but for demo only chat is blacklisted; u-2: app-wide
        // blacklist of grades; token 3 has no user and blacklists grades itself; token 4 no user, no set.
        try await running.apply([
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(1))", "user": "u-1"}"#,
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(2))", "user": "u-2"}"#,
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(3))"}"#,
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(4))"}"#,
            #"{"command": "add_to_group", "user": "u-1", "group": "class"}"#,
            #"{"command": "add_to_group", "user": "u-2", "group": "class"}"#,
            #"{"command": "add_to_blacklist", "user": "u-1", "type": "grades"}"#,
            #"{"command": "add_to_blacklist", "user": "u-1", "app": "demo", "entry": ["chat"]}"#,
            #"{"command": "add_to_blacklist", "user": "u-2", "entry": ["grades", "final"]}"#,
            #"{"command": "add_to_blacklist", "app": "demo", "token": "\#(Self.token(3))", "type": "grades"}"#,
        ])
        let tokens = (3...4).map { "\"\(Self.token($0))\"" }.joined(separator: ", ")
        let grades = try await running.job(
            #"{"id": "grades", "audience": {"groups": ["class"], "tokens": [\#(tokens)]}, "type": "grades", "subtype": "midterm", "payload": {"aps": {"alert": "B+"}}}"#, devices: 4)
        #expect(grades.mapValues(\.outcome) == [Self.token(1): .delivered, Self.token(2): .filtered, Self.token(3): .filtered, Self.token(4): .delivered])
        let chat = try await running.job(#"{"id": "chat", "audience": {"groups": ["class"]}, "type": "chat", "payload": {"aps": {"alert": "hi"}}}"#, devices: 2)
        #expect(chat.mapValues(\.outcome) == [Self.token(1): .filtered, Self.token(2): .delivered])

        let read = try await running.send(#"{"command": "get_preferences", "user": "u-1", "app": "demo"}"#, id: "get")
        let preferences = read["preferences"] as? [String: Any]
        #expect(preferences?["scope"] as? String == "user_app" && (preferences?["blacklist"] as? [String: [String]]) == ["chat": []], "\(read)")
        #expect((preferences?["whitelist"] as? [String: [String]]) == [:])
        // Taking chat out of u-1's set for demo empties it: the app-wide set applies again.
        try await running.apply([#"{"command": "remove_from_blacklist", "user": "u-1", "app": "demo", "type": "chat"}"#])
        let again = try await running.job(#"{"id": "grades-2", "audience": {"users": ["u-1"]}, "type": "grades", "payload": {"aps": {"alert": "A"}}}"#, devices: 1)
        #expect(again.mapValues(\.outcome) == [Self.token(1): .filtered])

        try await running.refused([
            (#"{"command": "add_to_blacklist", "app": "demo", "token": "\#(Self.token(9))", "type": "grades"}"#, "unknown_device", "token"),
            (#"{"command": "add_to_whitelist", "user": "u-1", "entry": []}"#, "invalid_field", "entry"),
        ])
        // A query that cannot be answered is answered with the error, and not dead-lettered.
        let unknown = try await running.send(#"{"command": "get_preferences", "app": "demo", "token": "\#(Self.token(9))"}"#, id: "get-unknown")
        #expect((unknown["error"] as? [String: Any])?["code"] as? String == "unknown_device", "\(unknown)")
        await #expect(throws: (any Error).self) { _ = try await running.dead.next(within: .seconds(2)) }
        try await running.stop()
    }

    @Test("badges that count, through the broker: each device gets its own number, chunks count once, an unregistered token fails with badge_needs_registration, reset_badge clears", arguments: [Kind.sqlite, .postgres])
    func countedBadges(_ kind: Kind) async throws {
        let (store, registry) = try await kind.make()
        let running = try await Running.start(registry: registry + "\nchunk_size: 2")
        try await running.apply((1...4).map { #"{"command": "register_device", "app": "demo", "token": "\#(Self.token($0))", "user": "u-\#($0 % 2)"}"# }
            + [#"{"command": "add_to_group", "user": "u-0", "group": "all"}"#, #"{"command": "add_to_group", "user": "u-1", "group": "all"}"#])
        func badges(in job: String) -> [String: Int] {
            Dictionary(running.setup.mock.recorded.compactMap { record -> (String, Int)? in
                guard let payload = try? JSONSerialization.jsonObject(with: Data(record.payload)) as? [String: Any],
                      payload["job"] as? String == job, let badge = (payload["aps"] as? [String: Any])?["badge"] as? Int else { return nil }
                return (record.token, badge)
            }, uniquingKeysWith: { first, _ in first })
        }
        // Token 1 opened the app before the first job; tokens 3 and 4 have counted one already.
        _ = try await store.incrementBadges(app: "demo", tokens: [Self.token(3), Self.token(4)], by: 1, job: "earlier")
        let first = try await running.job(
            #"{"id": "first", "audience": {"groups": ["all"]}, "payload": {"aps": {"alert": "1 new", "badge": "increment"}, "job": "first"}}"#, devices: 4)
        #expect(first.count == 4 && first.values.allSatisfy { $0.outcome == .delivered }, "\(first)")
        #expect(badges(in: "first") == [Self.token(1): 1, Self.token(2): 1, Self.token(3): 2, Self.token(4): 2])
        // Split into chunks of 2 and an unregistered token named too.
        let second = try await running.job(
            #"{"id": "second", "audience": {"users": ["u-1"], "tokens": ["\#(Self.token(9))", "\#(Self.token(2))"]}, "payload": {"aps": {"alert": "3 new", "badge": {"increment": 3}}, "job": "second"}}"#, devices: 4)
        #expect(second[Self.token(9)]?.outcome == .failed && second[Self.token(9)]?.reason == "badge_needs_registration", "\(second)")
        #expect(badges(in: "second") == [Self.token(1): 4, Self.token(2): 4, Self.token(3): 5])
        #expect(!running.setup.mock.recorded.contains { $0.token == Self.token(9) })

        try await running.apply([#"{"command": "reset_badge", "user": "u-1"}"#])
        let status = try await running.send(#"{"command": "status", "app": "demo", "token": "\#(Self.token(3))"}"#, id: "status")
        #expect((status["status"] as? [String: Any])?["badge"] as? Int == 0, "\(status)")
        _ = try await running.job(#"{"id": "third", "audience": {"users": ["u-1"]}, "payload": {"aps": {"alert": "1 new", "badge": "increment"}, "job": "third"}}"#, devices: 2)
        #expect(badges(in: "third") == [Self.token(1): 1, Self.token(3): 1])
        try await running.stop()
    }

    @Test("a counting job's retry round sends each device the count its first round gave, even when another job raised the counter meanwhile", arguments: [Kind.sqlite, .postgres])
    func badgeRetryRound(_ kind: Kind) async throws {
        let (store, registry) = try await kind.make()
        let running = try await Running.start(
            // The retry round's pause outlasts job B on a busy machine (1.5 s once did not).
            registry: registry + "\nretry_in_process_attempts: 1\nretry_delays_ms: [8000]",
            faults: [MockAPNsFault(.reject(.tooManyRequests), tokens: [Self.token(1)], times: 1)])
        try await running.apply((1...2).map { #"{"command": "register_device", "app": "demo", "token": "\#(Self.token($0))", "user": "u-\#($0)"}"# })
        // Job A: token 1 is refused once (429) and handed to a retry round 8 s later.
        try await running.publisher.publish(.toQueue("\(running.setup.prefix).jobs", body: Array(
            #"{"id": "a", "audience": {"users": ["u-1", "u-2"]}, "payload": {"aps": {"alert": "A", "badge": "increment"}, "job": "a"}}"#.utf8)))
        var results: [PushResult] = []
        func next() async throws {
            let delivery = try await running.results.next(within: .seconds(30))
            try await delivery.ack()
            if case .result(let result) = try Reply(delivery) { results.append(result) }
        }
        // A's first round is done (token 2's result): both counters were raised together. Its
        // token 1 request must have met the 429 before B is published: on a busy machine it once
        // reached the mock after B's, and B's took the fault.
        while results.isEmpty { try await next() }
        try await waitUntil("both of job A's requests reach the mock", progress: { running.setup.mock.requestCount }) { running.setup.mock.requestCount >= 2 }
        // Job B raises token 1's counter while A's retry round waits.
        try await running.publisher.publish(.toQueue("\(running.setup.prefix).jobs", body: Array(
            #"{"id": "b", "audience": {"users": ["u-1"]}, "payload": {"aps": {"alert": "B", "badge": "increment"}, "job": "b"}}"#.utf8)))
        while results.count < 3 {  // A's token 2, B's token 1, then A's retry round
            try await next()
        }
        #expect(results.allSatisfy { $0.outcome == .delivered }, "\(results)")
        #expect(results.last.map { [$0.jobID, $0.token] } == ["a", Self.token(1)], "\(results)")
        var sent: [String: [Int]] = [:]
        for record in running.setup.mock.recorded {
            let payload = try #require(try JSONSerialization.jsonObject(with: Data(record.payload)) as? [String: Any])
            let badge = try #require((payload["aps"] as? [String: Any])?["badge"] as? Int)
            sent["\(payload["job"] ?? "?") \(record.token == Self.token(1) ? 1 : 2)", default: []].append(badge)
        }
        // A's retry round sends the count A's first round got, not a third increment.
        #expect(sent == ["a 1": [1], "a 2": [1], "b 1": [2]], "\(sent)")
        #expect(try await store.badgeCount(app: "demo", token: Self.token(1)) == 2)
        try await running.stop()
    }

    @Test("registry.auth through the broker: commands carry the user's own token; one without it, or with another user's, is answered unauthorized and dead-lettered with neither the token in its headers nor in its body", arguments: [Kind.sqlite, .postgres])
    func userTokens(_ kind: Kind) async throws {
        let (store, registry) = try await kind.make()
        let tokens = await TestUserTokens()
        let key = FileManager.default.temporaryDirectory.appendingPathComponent("auth-\(UUID().uuidString.prefix(8)).pem")
        try Data(tokens.publicKeyPEM.utf8).write(to: key)
        let auth = "auth: {issuer: \"\(TestUserTokens.issuer)\", audience: \(TestUserTokens.audience), key_file: \(key.path)}"
        let running = try await Running.start(registry: String(registry.dropLast()) + ", \(auth)}")
        try await running.worker.waitForLog("registry commands need the user's token")
        let u1 = try await tokens.token(for: "u-1"), u2 = try await tokens.token(for: "u-2")
        try await running.apply([
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(1))", "user": "u-1", "auth": "\#(u1)"}"#,
            #"{"command": "add_to_blacklist", "user": "u-1", "type": "chat", "auth": "\#(u1)"}"#,
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(2))"}"#,
        ])
        let status = try await running.send(#"{"command": "status", "app": "demo", "token": "\#(Self.token(1))", "auth": "\#(u1)"}"#, id: "status")
        #expect((status["status"] as? [String: Any])?["user"] as? String == "u-1", "\(status)")

        let refused = [
            #"{"command": "delete_user", "user": "u-1"}"#,
            #"{"command": "set_preferences", "user": "u-1", "blacklist": {}, "auth": "\#(u2)"}"#,
            #"{"command": "unregister_device", "app": "demo", "token": "\#(Self.token(1))", "auth": "\#(u2)"}"#,
        ]
        for (index, json) in refused.enumerated() {
            let reply = try await running.send(json, id: "unauthorized-\(index)")
            let error = reply["error"] as? [String: Any]
            #expect(reply["ok"] as? Bool == false && error?["code"] as? String == "unauthorized" && error?["field"] as? String == "auth", "\(reply)")
            let letter = try await running.dead.next(within: .seconds(30))
            try await letter.ack()
            #expect(letter.properties.headers?[WireHeader.error]?.stringValue == "unauthorized")
            let headers = "\(letter.properties.headers ?? [:])"
            #expect(!headers.contains(u2.prefix(24)) && !headers.contains(u1.prefix(24)), "a token in the headers: \(headers)")
            let body = try #require(try JSONSerialization.jsonObject(with: Data(letter.body)) as? [String: Any])
            #expect(body["auth"] == nil && body["command"] != nil, "\(body)")
        }
        #expect(try await store.device(app: "demo", token: Self.token(1))?.user == "u-1", "refused commands changed nothing")
        #expect(try await store.preferences(.user("u-1")) == NotificationPreferences(blacklist: ["chat": []]))
        // config check shows the auth settings, no secret.
        let check = try await Program.running(["config", "check", "--config", running.setup.config.path])
        #expect(check.status == 0 && check.standardOutput.contains("issuer: https://id.example.com") && check.standardOutput.contains(key.path), "\(check.standardOutput)\(check.standardError)")
        try await running.stop()
    }

    @Test("dlq replay sends a dead-lettered registry command back to the registry queue; dying again it keeps its first reason; applied once it can be")
    func replayToRegistryQueue() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db").path
        let setup = try await WorkerProcessTests.setUp(faults: [], extra: "registry: {sqlite: \(file)}")
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("registry commands consumed")
        let replies = "\(setup.prefix).replies"
        let topology = AMQPTopology(queues: [.durable(replies)])
        let publisher = try await TestBroker.publisher(topology: topology)
        let answers = try await TestBroker.consumer(queue: replies, topology: topology)
        func answer() async throws -> [String: Any] {
            let delivery = try await answers.next(within: .seconds(30))
            try await delivery.ack()
            #expect(delivery.properties.correlationID == "join-later")
            return try #require(try JSONSerialization.jsonObject(with: Data(delivery.body)) as? [String: Any])
        }
        func errorCode(_ reply: [String: Any]) -> String? { (reply["error"] as? [String: Any])?["code"] as? String }
        let dlq = ["--config", setup.config.path]
        /// The dead letters, polled until `done` holds (the worker dead-letters after it answers).
        func letters(until done: ([DeadLetter.Listing]) -> Bool) async throws -> [DeadLetter.Listing] {
            let deadline = ContinuousClock.now + .seconds(30)
            while true {
                let listed = try await Program.running(["dlq", "list", "--json"] + dlq)
                #expect(listed.status == 0, "\(listed.standardError)")
                let listings = try listed.standardOutput.split(separator: "\n").map { try JSONDecoder().decode(DeadLetter.Listing.self, from: Data($0.utf8)) }
                if done(listings) || ContinuousClock.now > deadline { return listings }
                try await Task.sleep(for: .milliseconds(200))
            }
        }

        try await publisher.publish(AMQPMessage(
            exchange: "\(setup.prefix).push", routingKey: "registry",
            body: Array(#"{"command": "add_to_group", "user": "u-1", "group": "later", "create_group": false}"#.utf8),
            properties: AMQPProperties(contentType: "application/json", persistent: true, replyTo: replies, messageID: "join-later"), mandatory: true))
        #expect(errorCode(try await answer()) == "unknown_group")
        let first = try await letters { !$0.isEmpty }
        #expect(first.map(\.id) == ["join-later"] && first.first?.queue == "\(setup.prefix).registry" && first.first?.error == "unknown_group", "\(first)")

        // Still no such group: refused again by the registry consumer, not as a job.
        let replay = try await Program.running(["dlq", "replay", "--error", "unknown_group"] + dlq)
        #expect(replay.status == 0 && replay.standardOutput.contains("to \(setup.prefix).registry"), "\(replay.standardOutput)\(replay.standardError)")
        #expect(errorCode(try await answer()) == "unknown_group")
        let again = try await letters { $0.first?.replays == 1 }
        #expect(again.count == 1)
        #expect(again.first?.error == "unknown_group" && again.first?.firstError == "unknown_group" && again.first?.replays == 1, "\(again)")
        #expect(again.first?.queue == "\(setup.prefix).registry")

        // Once the group exists the replayed command is applied, and no dead letter is left.
        try await SQLiteRegistryStore(path: file).apply(.addToGroup(user: "u-2", group: "later", createGroup: true))
        #expect(try await Program.running(["dlq", "replay", "--all"] + dlq).status == 0)
        #expect(try await answer()["ok"] as? Bool == true)
        #expect(try await letters { $0.isEmpty }.isEmpty)
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await answers.close()
        await publisher.close()
    }

    @Test("a registry path that cannot be opened stops the worker at start, naming the key")
    func badPath() async throws {
        let setup = try await WorkerProcessTests.setUp(faults: [], extra: "registry: {sqlite: /nonexistent-dir/registry.db}")
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        let status = try await worker.stop(signal: 0, within: .seconds(60))
        #expect(status != 0)
        #expect(worker.log.contains("registry.sqlite"), "\(worker.log)")
    }
}
