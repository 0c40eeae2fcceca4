import AMQP
import Foundation
import Logging
import PostgresStores
import PushWorker
import SQLiteStores
import Stores
import TestSupport
import Testing

/// The pipeline with a real registry (an SQLite file; a PostgreSQL database whose pool has one
/// connection): a group job larger than a chunk is split as its pages are read, each device once
/// with its user, filtered ones carried in the chunks, and every chunk labelled from the count.
@Suite("The job pipeline with a registry")
struct RegistryPipelineTests {
    enum Kind: String, CaseIterable, Sendable, CustomStringConvertible {
        case sqlite, postgres
        var description: String { rawValue }

        func makeStore() async throws -> any RegistryStore {
            switch self {
            case .sqlite:
                return try SQLiteRegistryStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db").path)
            case .postgres:
                // One connection: a resolution that asked the pool for a second would wait forever.
                return try await PostgresRegistryStore(url: try await TestPostgres.freshDatabase(), maximumConnections: 1, logger: Logger(label: "test.registry"))
            }
        }
    }

    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xB000) }

    @Test("a group job split as it is read: each device once, with its user, filtered devices in the chunks, labels from the count", arguments: Kind.allCases)
    func splitGroup(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        // Users u0…u9 with a device each in the group; u3 and u7 blacklist the type; u9's device
        // belongs to another app; token 20 is named by the job and belongs to nobody.
        for index in 0..<10 {
            try await store.apply(.registerDevice(app: index == 9 ? "other" : "demo", token: Self.token(index), user: "u\(index)"))
            try await store.apply(.addToGroup(user: "u\(index)", group: "class", createGroup: true))
        }
        for user in ["u3", "u7"] { try await store.apply(.setPreferences(.user(user), NotificationPreferences(blacklist: ["grades": []]))) }
        let harness = JobPipelineTests.Harness(chunkSize: 4, resolver: RegistryResolver(store: store, logger: Logger(label: "test.registry")))

        // Tokens 1 and 3 are named as well as reached through the group: sent (or filtered) once.
        let job = #"{"id": "g", "audience": {"groups": ["class"], "tokens": ["\#(Self.token(1))", "\#(Self.token(3))", "\#(Self.token(20))"]}, "type": "grades", "payload": {"aps": {}}}"#
        let settlement = try await withDeadline { await harness.run(job) }
        #expect(settlement == .acknowledge)
        #expect(harness.sender.sent.isEmpty, "the splitting worker sends nothing")
        let chunks = harness.publisher.messages(to: JobPipelineTests.bulk)
        // 9 devices of app demo + token 20 = 10 devices in chunks of 4. The splitter publishes up
        // to 32 chunks at once, so they may reach the stand-in publisher in any order.
        #expect(chunks.compactMap { $0.properties.headers?[WireHeader.chunk]?.stringValue }.sorted() == ["1/3", "2/3", "3/3"])
        for chunk in chunks { #expect(await harness.run(chunk) == .acknowledge) }

        let results = try harness.publisher.results(to: JobPipelineTests.results)
        #expect(results.count == 10)
        #expect(Set(results.map(\.token)).count == 10, "each device once")
        let byToken = Dictionary(uniqueKeysWithValues: results.map { ($0.token, $0) })
        #expect(byToken[Self.token(3)]?.outcome == .filtered && byToken[Self.token(7)]?.outcome == .filtered)
        #expect(byToken[Self.token(9)] == nil, "another app's device")
        #expect(byToken[Self.token(20)]?.user == nil && byToken[Self.token(20)]?.outcome == .delivered)
        for index in [0, 1, 2, 4, 5, 6, 8] {
            #expect(byToken[Self.token(index)]?.user == "u\(index)" && byToken[Self.token(index)]?.outcome == .delivered)
        }
        #expect(harness.sender.sent.count == 8)
        let summaries = try harness.publisher.summaries(to: JobPipelineTests.results)
        #expect(summaries.map(\.devices).reduce(0, +) == 10)
        #expect(summaries.map { $0.outcomes[.filtered] ?? 0 }.reduce(0, +) == 2)
    }

    /// Fails the test instead of hanging when the pipeline stops making progress.
    func withDeadline<T: Sendable>(_ body: @escaping @Sendable () async -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                return nil
            }
            guard let first = try await group.next(), let value = first else {
                group.cancelAll()
                throw TestFailure("the job made no progress for 60 s (a resolution waiting for a second pool connection?)")
            }
            group.cancelAll()
            return value
        }
    }
}
