import AMQP
import Foundation
import Logging
import PushWorker
import SQLiteStores
import Stores
import RegistryAuth
import TestSupport
import Testing

/// The registry service's handling of a command, in process: a real SQLite store and a recording
/// publisher, no broker. The running program's tests (RegistryWorkerTests) cover the queue around it.
@Suite("Registry commands, handled in process")
struct RegistryCommandHandlerTests {
    static let token = TestDeviceTokens.hex(1, series: 0x4E61)

    struct Harness {
        let store: SQLiteRegistryStore
        let publisher: RecordingPublisher
        let handler: RegistryCommandHandler

        init(
            failure: @escaping @Sendable (AMQPMessage) -> AMQPError? = { _ in nil }, ledger: (any LedgerStore)? = nil,
            authorizer: CommandAuthorizer? = nil, schedule: JobScheduler? = nil
        ) throws {
            TestLog.bootstrap()
            store = try SQLiteRegistryStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("handler-\(UUID().uuidString.prefix(8)).db").path)
            publisher = RecordingPublisher(queues: ["replies"], failure: failure)
            handler = RegistryCommandHandler(
                store: store, authorizer: authorizer, queues: WorkerSettings.Names(), apps: ["demo"], ledger: ledger, schedule: schedule,
                logger: Logger(label: "test.registry"))
        }

        func handle(_ json: String, id: String = "c-1") async -> JobSettlement {
            await handler.handle(Array(json.utf8), properties: AMQPProperties(replyTo: "replies", messageID: id), via: publisher)
        }

        /// The replies, in order, as JSON objects, each checked to answer its command's message id.
        func replies() throws -> [[String: Any]] {
            try publisher.messages(to: "replies").map { message in
                #expect(message.properties.type == "registry_reply" && message.properties.correlationID != nil)
                return try #require(try JSONSerialization.jsonObject(with: Data(message.body)) as? [String: Any])
            }
        }
    }

    @Test("a command is applied to the store and answered ok, correlated with its message id; a query is answered with its answer")
    func applied() async throws {
        let harness = try Harness()
        #expect(await harness.handle(#"{"command": "register_device", "app": "demo", "token": "\#(Self.token)", "user": "u-1"}"#) == .acknowledge)
        #expect(try await harness.store.device(app: "demo", token: Self.token)?.user == "u-1")
        #expect(await harness.handle(#"{"command": "get_preferences", "user": "u-1"}"#, id: "q-1") == .acknowledge)
        let replies = try harness.replies()
        #expect(replies.count == 2 && replies[0]["ok"] as? Bool == true)
        #expect(replies[1]["ok"] as? Bool == true && replies[1].count > 1, "\(replies[1])")
        #expect(harness.publisher.messages(to: "replies").map(\.properties.correlationID) == ["c-1", "q-1"])
        #expect(harness.publisher.messages.allSatisfy { $0.exchange.isEmpty }, "nothing dead-lettered")
    }

    @Test("cancel_job: a waiting job is cancelled and answered with it; an unknown job and a second cancel are answered, not dead-lettered; bad fields are answered and dead-lettered, naming the field; without a schedule it says so")
    func cancelJob() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("handler-schedule-\(UUID().uuidString.prefix(8)).db").path
        let schedule = try SQLiteScheduleStore(ledger: try SQLiteLedgerStore(path: path))
        try await schedule.hold(HeldJob(jobID: "j-1", app: "demo", idempotencyKey: "k-1", releaseAt: 4_000_000_000_000, body: "{}", heldAt: 1))
        let harness = try Harness(schedule: JobScheduler(store: schedule))
        for (index, json) in [
            #"{"command": "cancel_job", "app": "demo", "job": "j-1"}"#, #"{"command": "cancel_job", "idempotency_key": "k-1"}"#,
            #"{"command": "cancel_job", "job": "nope"}"#, #"{"command": "cancel_job"}"#, #"{"command": "cancel_job", "job": "j-1", "when": "now"}"#,
            #"{"command": "cancel_job", "job": 7}"#,
        ].enumerated() {
            #expect(await harness.handle(json, id: "c-\(index)") == .acknowledge)
        }
        let replies = try harness.replies()
        #expect(((replies[0]["cancelled"] as? [String: Any])?["state"] as? String) == "cancelled", "\(replies[0])")
        let errors = replies.dropFirst().map { ($0["error"] as? [String: Any]).map { "\($0["code"] ?? "")/\($0["field"] ?? "")" } }
        #expect(errors == ["job_ended/idempotency_key", "unknown_job/job", "invalid_field/job", "invalid_field/when", "invalid_field/job"], "\(replies)")
        let letters = harness.publisher.messages.filter { !$0.exchange.isEmpty }
        #expect(letters.map(\.properties.messageID) == ["c-3", "c-4", "c-5"], "only the malformed commands are dead-lettered")
        #expect(try await schedule.scheduledJob(HeldJobName(.job("j-1")))?.state == .cancelled)

        let without = try Harness()
        #expect(await without.handle(#"{"command": "cancel_job", "job": "j-1"}"#) == .acknowledge)
        #expect((try without.replies().first?["error"] as? [String: Any])?["message"] as? String == "cancel_job needs the schedule, kept in the delivery ledger's store, and this worker keeps none (ledger: off)")
    }

    @Test("a command that cannot be applied is dead-lettered with its reason and without the user's token, and answered with the error naming the field; the store is unchanged")
    func refused() async throws {
        let harness = try Harness()
        let body = #"{"command": "register_device", "app": "elsewhere", "token": "\#(Self.token)", "auth": "secret.jwt.value"}"#
        #expect(await harness.handle(body) == .acknowledge)
        let letter = try #require(harness.publisher.messages.first { $0.exchange == "push.dlx" })
        #expect(letter.routingKey == "push.registry")
        #expect(letter.properties.headers?[WireHeader.error] == "unknown_app")
        #expect(letter.properties.headers?[WireHeader.errorField] == "app")
        #expect(letter.properties.headers?[WireHeader.queue] == "push.registry")
        #expect(!String(decoding: letter.body, as: UTF8.self).contains("secret.jwt.value"), "the bearer token is not kept")
        let reply = try #require(try harness.replies().first)
        let error = try #require(reply["error"] as? [String: Any])
        #expect(reply["ok"] as? Bool == false && error["code"] as? String == "unknown_app" && error["field"] as? String == "app")
        #expect(try await harness.store.device(app: "elsewhere", token: Self.token) == nil)
    }

    @Test("a refused command whose dead letter the broker does not confirm goes back to the queue, unanswered")
    func deadLetterFails() async throws {
        let harness = try Harness(failure: { $0.exchange == "push.dlx" ? AMQPError(.nacked, "no") : nil })
        #expect(await harness.handle(#"{"command": "no_such_command"}"#) == .requeue)
        #expect(harness.publisher.messages(to: "replies").isEmpty)
    }

    @Test("a channel request to a handler without the apps' credentials is answered, not dead-lettered")
    func channelWithoutCredentials() async throws {
        let harness = try Harness()
        #expect(await harness.handle(#"{"command": "list_channels", "app": "demo"}"#) == .acknowledge)
        let reply = try #require(try harness.replies().first)
        #expect(reply["ok"] as? Bool == false && (reply["error"] as? [String: Any])?["code"] as? String == "unknown_command", "\(reply)")
        #expect(!harness.publisher.messages.contains { $0.exchange == "push.dlx" })
    }

    @Test("get_deliveries answers from the ledger, newest first; a bad field is answered naming it; without a ledger it says so")
    func deliveries() async throws {
        let ledger = try SQLiteLedgerStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("handler-ledger-\(UUID().uuidString.prefix(8)).db").path)
        try await ledger.write([
            DeliveryRecord(jobID: "j-1", app: "demo", token: Self.token, user: "u-1", outcome: "delivered", status: 200, attempts: 1, at: 1_795_000_000_000),
            DeliveryRecord(jobID: "j-2", app: "demo", token: Self.token, user: "u-1", outcome: "rejected", status: 410, reason: "Unregistered", attempts: 1, at: 1_795_000_001_000),
        ])
        let harness = try Harness(ledger: ledger)
        #expect(await harness.handle(#"{"command": "get_deliveries", "user": "u-1", "since": "2026-11-18T00:00:00Z"}"#) == .acknowledge)
        let records = try #require(try harness.replies().first?["deliveries"] as? [[String: Any]])
        #expect(records.map { $0["job_id"] as? String } == ["j-2", "j-1"])
        #expect(records.first?["reason"] as? String == "Unregistered" && records.first?["status"] as? Int == 410)
        #expect(await harness.handle(#"{"command": "get_deliveries", "app": "demo", "token": "\#(Self.token)", "limit": 1}"#, id: "c-2") == .acknowledge)
        #expect((try harness.replies()[1]["deliveries"] as? [[String: Any]])?.count == 1)
        #expect(await harness.handle(#"{"command": "get_deliveries", "user": "u-1", "until": "Tuesday"}"#, id: "c-3") == .acknowledge)
        #expect((try harness.replies()[2]["error"] as? [String: Any])?["field"] as? String == "until")
        #expect(await harness.handle(#"{"command": "get_deliveries", "user": "u-1", "job": "j-1"}"#, id: "c-4") == .acknowledge)
        #expect((try harness.replies()[3]["error"] as? [String: Any])?["field"] as? String == "job")

        let without = try Harness()
        #expect(await without.handle(#"{"command": "get_deliveries", "job": "j-1"}"#) == .acknowledge)
        let error = try #require(try without.replies().first?["error"] as? [String: Any])
        #expect(error["code"] as? String == "unknown_command" && (error["message"] as? String)?.contains("ledger") == true, "\(error)")
    }

    @Test("get_deliveries by idempotency_key finds the job holding the key; after and next page through the records until next is null; a bad after is answered naming it")
    func deliveriesByKeyInPages() async throws {
        let ledger = try SQLiteLedgerStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("handler-ledger-\(UUID().uuidString.prefix(8)).db").path)
        let now: Int64 = 1_795_000_000_000
        #expect(try await ledger.claim(key: "order-77", app: "demo", job: "j-7", again: false, now: now, freeBefore: now - 86_400_000) == nil)
        let tokens = (0..<5).map { TestDeviceTokens.hex($0, series: 0x4E62) }
        try await ledger.write(tokens.enumerated().map { index, token in
            DeliveryRecord(jobID: "j-7", app: "demo", token: token, outcome: "delivered", status: 200, attempts: 1, at: now + Int64(index / 2))
        } + [DeliveryRecord(jobID: "j-8", app: "demo", token: tokens[0], outcome: "delivered", attempts: 1, at: now + 10)])
        let harness = try Harness(ledger: ledger)
        var pages: [[String]] = []
        var after: String?
        repeat {
            let id = "p-\(pages.count)"
            let field = after.map { #", "after": "\#($0)""# } ?? ""
            #expect(await harness.handle(#"{"command": "get_deliveries", "idempotency_key": "order-77", "limit": 2\#(field)}"#, id: id) == .acknowledge)
            let reply = try #require(try harness.replies().last)
            let records = try #require(reply["deliveries"] as? [[String: Any]], "\(reply)")
            #expect(records.allSatisfy { $0["job_id"] as? String == "j-7" }, "only the key's job: \(records)")
            pages.append(records.compactMap { $0["token"] as? String })
            after = reply["next"] as? String
            #expect(after != nil || reply["next"] is NSNull, "next is always in the answer: \(reply)")
        } while after != nil && pages.count < 10
        #expect(pages == [[tokens[4], tokens[2]], [tokens[3], tokens[0]], [tokens[1]]], "newest first, then by token, each once")

        #expect(await harness.handle(#"{"command": "get_deliveries", "idempotency_key": "order-77", "after": "not-a-cursor"}"#, id: "bad") == .acknowledge)
        let error = try #require(try harness.replies().last?["error"] as? [String: Any])
        #expect(error["code"] as? String == "invalid_field" && error["field"] as? String == "after", "\(error)")
        #expect(await harness.handle(#"{"command": "get_deliveries", "idempotency_key": "order-77", "job": "j-7"}"#, id: "two") == .acknowledge)
        #expect((try harness.replies().last?["error"] as? [String: Any])?["field"] as? String == "job")
    }

    @Test("with registry.auth, get_deliveries needs a user's token and answers with that user's devices only, whatever it names")
    func deliveriesWithAuth() async throws {
        let tokens = await TestUserTokens()
        let authorizer = try await CommandAuthorizer(material: .publicKey(pem: tokens.publicKeyPEM), issuer: TestUserTokens.issuer, audience: TestUserTokens.audience)
        let ledger = try SQLiteLedgerStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("handler-ledger-\(UUID().uuidString.prefix(8)).db").path)
        let other = TestDeviceTokens.hex(2, series: 0x4E61)
        try await ledger.write([
            DeliveryRecord(jobID: "j-1", app: "demo", token: Self.token, user: "u-1", outcome: "delivered", attempts: 1, at: 1_795_000_000_000),
            DeliveryRecord(jobID: "j-1", app: "demo", token: other, user: "u-2", outcome: "delivered", attempts: 1, at: 1_795_000_000_000),
        ])
        let harness = try Harness(ledger: ledger, authorizer: authorizer)
        let mine = try await tokens.token(for: "u-1")
        #expect(await harness.handle(#"{"command": "get_deliveries", "job": "j-1", "auth": "\#(mine)"}"#) == .acknowledge)
        let records = try #require(try harness.replies().first?["deliveries"] as? [[String: Any]])
        #expect(records.map { $0["user"] as? String } == ["u-1"], "another user's device is not shown")
        #expect(await harness.handle(#"{"command": "get_deliveries", "user": "u-2", "auth": "\#(mine)"}"#, id: "c-2") == .acknowledge)
        #expect((try harness.replies()[1]["error"] as? [String: Any])?["code"] as? String == "unauthorized")
        #expect(await harness.handle(#"{"command": "get_deliveries", "job": "j-1"}"#, id: "c-3") == .acknowledge)
        #expect((try harness.replies()[2]["error"] as? [String: Any])?["field"] as? String == "auth")
    }
}
