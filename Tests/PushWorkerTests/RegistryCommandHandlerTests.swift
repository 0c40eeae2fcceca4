import AMQP
import Foundation
import Logging
import PushWorker
import Registry
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

        init(failure: @escaping @Sendable (AMQPMessage) -> AMQPError? = { _ in nil }) throws {
            TestLog.bootstrap()
            store = try SQLiteRegistryStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("handler-\(UUID().uuidString.prefix(8)).db").path)
            publisher = RecordingPublisher(queues: ["replies"], failure: failure)
            handler = RegistryCommandHandler(store: store, queues: WorkerSettings.Names(), apps: ["demo"], logger: Logger(label: "test.registry"))
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
}
