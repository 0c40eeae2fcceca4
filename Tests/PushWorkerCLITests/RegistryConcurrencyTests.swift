import AMQP
import Foundation
import PushWorker
import Stores
import TestSupport
import Testing

/// Two worker processes on one registry (one SQLite file; one PostgreSQL database) apply
/// commands from several publishers at once: every command is answered ok, and the registry ends
/// as the commands say, whichever worker applied which.
@Suite("Registry commands from several publishers, two workers", .heavy, .usesBroker)
struct RegistryConcurrencyTests {
    static let publishers = 4
    /// Users per publisher, four commands each: 10,000 commands in all.
    static let usersPerPublisher = 625

    static func token(_ publisher: Int, _ user: Int) -> String { String(format: "%032x%032x", 0xF0 + publisher, user) }

    /// A publisher's commands for its users, in an order that interleaves them: all commute, so
    /// any order of application ends in the same state.
    static func commands(of publisher: Int) -> [String] {
        var commands: [String] = []
        for step in 0..<4 {
            for index in 0..<usersPerPublisher {
                let user = "p\(publisher)-u\(index)"
                switch step {
                case 0: commands.append(#"{"command": "register_device", "app": "demo", "token": "\#(token(publisher, index))", "user": "\#(user)"}"#)
                case 1: commands.append(#"{"command": "add_to_group", "user": "\#(user)", "group": "all"}"#)
                case 2: commands.append(#"{"command": "add_to_group", "user": "\#(user)", "group": "g\#(index % 5)"}"#)
                default: commands.append(#"{"command": "set_preferences", "user": "\#(user)", "blacklist": {"t\#(index % 3)": []}}"#)
                }
            }
        }
        return commands
    }

    @Test("10,000 interleaved commands: every one answered ok, a consistent end state", arguments: [RegistryWorkerTests.Kind.sqlite, .postgres])
    func interleaved(_ kind: RegistryWorkerTests.Kind) async throws {
        let (store, registry) = try await kind.make()
        let setup = try await WorkerProcessTests.setUp(faults: [], extra: registry)
        defer { Task { try? await setup.mock.shutdown() } }
        let workers = try (0..<2).map { _ in try RunningProgram.worker(config: setup.config) }
        for worker in workers { try await worker.waitForLog("registry commands consumed") }
        let replies = "\(setup.prefix).replies"
        let topology = AMQPTopology(queues: [.durable(replies)])
        let answers = try await TestBroker.consumer(queue: replies, prefetch: 500, topology: topology)
        let total = Self.publishers * Self.usersPerPublisher * 4

        try await withThrowingTaskGroup(of: Void.self) { group in
            for publisherIndex in 0..<Self.publishers {
                group.addTask {
                    let publisher = try await TestBroker.publisher(topology: topology)
                    try await withThrowingTaskGroup(of: Void.self) { inFlight in
                        for (index, command) in Self.commands(of: publisherIndex).enumerated() {
                            if index >= 50 { try await inFlight.next() }
                            let message = AMQPMessage(
                                exchange: "\(setup.prefix).push", routingKey: "registry", body: Array(command.utf8),
                                properties: AMQPProperties(persistent: true, replyTo: replies, messageID: "p\(publisherIndex)-\(index)"), mandatory: true)
                            inFlight.addTask { try await publisher.publish(message) }
                        }
                        try await inFlight.waitForAll()
                    }
                    await publisher.close()
                }
            }
            try await group.waitForAll()
        }

        var answered = Set<String>()
        var refused: [String] = []
        while answered.count < total {
            guard let answer = try await answers.next(waitingAtMost: .seconds(60)) else {
                Issue.record("no answer for 60 s: \(answered.count) of \(total) commands answered")
                break
            }
            try await answer.ack()
            let id = answer.properties.correlationID ?? "?"
            #expect(answered.insert(id).inserted, "two answers for \(id)")
            if String(decoding: answer.body, as: UTF8.self) != #"{"ok":true}"# { refused.append("\(id): \(String(decoding: answer.body, as: UTF8.self))") }
        }
        #expect(refused.isEmpty, "\(refused.prefix(5))")

        let users = Self.publishers * Self.usersPerPublisher
        #expect(try await store.group("all", sampleSize: 0) == RegisteredGroup(name: "all", members: users, devicesByApp: ["demo": users], sample: []))
        for group in 0..<5 {
            #expect(try await store.group("g\(group)", sampleSize: 0)?.members == users / 5)
        }
        for publisher in 0..<Self.publishers {
            for index in [0, 1, 2, Self.usersPerPublisher - 1] {
                #expect(try await store.user("p\(publisher)-u\(index)") == RegisteredUser(
                    id: "p\(publisher)-u\(index)", devices: [.init(app: "demo", token: Self.token(publisher, index), invalid: false)],
                    groups: ["all", "g\(index % 5)"], preferences: NotificationPreferences(blacklist: ["t\(index % 3)": []])))
            }
        }
        var resolved = 0
        try await store.withAudience(app: "demo", users: [], groups: ["g0", "g1"]) { audience in
            try await audience.pages(size: 1000) { resolved += $0.count }
        }
        #expect(resolved == users * 2 / 5)
        for worker in workers { #expect(try await worker.stop() == 0, "\(worker.log)") }
        await answers.close()
    }
}
