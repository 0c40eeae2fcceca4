import Foundation
import Logging
import PostgresStores
import ServiceLifecycle
import TestSupport
import Testing

/// A worker's PostgreSQL pool holds its connections and keeps each alive with its own query, in
/// place of postgres-nio's per-connection timers (see `PostgresPool`).
@Suite("PostgreSQL pool")
struct PostgresPoolTests {
    @Test("a worker's pool opens all its connections, keeps them, and runs a keep-alive query on each")
    func holdsAndKeepsAlive() async throws {
        let url = try await TestPostgres.freshDatabase()
        let database = String(try #require(URLComponents(string: url)).path.dropFirst())
        let store = try await PostgresRegistryStore(
            url: url, maximumConnections: 3, holdsConnections: true, keepAliveInterval: .milliseconds(200), logger: Logger(label: "test.pool"))
        let group = ServiceGroup(services: [store.pool], logger: Logger(label: "test.pool"))
        let running = Task { try await group.run() }
        defer { running.cancel() }

        // Each of the three backends' last statement is the keep-alive's (the migration's
        // connection included), so every held connection was pinged. Bounded by 30 s without it.
        let statement = "SELECT count(*) FILTER (WHERE query = 'SELECT 1') || '/' || count(*) FROM pg_stat_activity WHERE datname = '\(database)'"
        var seen = ""
        for _ in 0..<150 {
            seen = try await TestPostgres.query([statement], at: TestPostgres.url).first ?? ""
            if seen == "3/3" { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(seen == "3/3", "backends whose last query was the keep-alive's / all the pool's backends")

        await group.triggerGracefulShutdown()
        try await running.value
    }
}
