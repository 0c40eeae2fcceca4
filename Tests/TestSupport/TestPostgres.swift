import Foundation
import Logging
import PostgresNIO
import Synchronization

/// The throw-away PostgreSQL `deploy/local/postgres.sh` starts (test.sh starts it and sets
/// `PUSHWORKER_TEST_POSTGRES_URL`), and a new empty database on it for each test that needs one.
public enum TestPostgres {
    public static let url = ProcessInfo.processInfo.environment["PUSHWORKER_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:15432/pushworker"

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Creates a database of its own for one test and returns its URL.
    public static func freshDatabase() async throws -> String {
        guard var components = URLComponents(string: url) else {
            throw Unavailable(description: "PUSHWORKER_TEST_POSTGRES_URL '\(url)' is not a postgres:// URL")
        }
        let name = "test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        _ = try await query(["CREATE DATABASE \(name)"], at: url)
        components.path = "/" + name
        return components.string!
    }

    /// Runs `statements` in order on the database at `url` (each on its own, as a test sets up
    /// what an older version left behind) and returns the last one's first column as text.
    public static func query(_ statements: [String], at url: String) async throws -> [String] {
        guard let components = URLComponents(string: url), let host = components.host else {
            throw Unavailable(description: "PUSHWORKER_TEST_POSTGRES_URL '\(url)' is not a postgres:// URL")
        }
        let configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
            database: String(components.path.dropFirst()), tls: .disable)
        let client = PostgresClient(configuration: configuration, backgroundLogger: Logger(label: "test.postgres"))
        let progress = Progress()
        let rows: [String]? = try await withThrowingTaskGroup(of: [String]?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            group.addTask {
                var rows: [String] = []
                for statement in statements {
                    rows = []
                    for try await row in try await client.query(PostgresQuery(unsafeSQL: statement)) {
                        rows.append(try row.decode(String?.self) ?? "")
                    }
                    progress.made()
                }
                return rows
            }
            group.addTask {
                // A limit on lack of progress, not on the total: each statement has 60 s.
                while !progress.stalled(for: .seconds(60)) { try await Task.sleep(for: .seconds(1)) }
                return nil
            }
            var rows: [String]?
            for try await result in group {
                rows = result
                break
            }
            group.cancelAll()
            return rows
        }
        guard let rows else {
            throw Unavailable(description: "no PostgreSQL answers at \(url) (run deploy/local/postgres.sh start, or set PUSHWORKER_TEST_POSTGRES_URL)")
        }
        return rows
    }

    /// When the last statement answered.
    private final class Progress: Sendable {
        private let last = Mutex(ContinuousClock.now)
        func made() { last.withLock { $0 = .now } }
        func stalled(for limit: Duration) -> Bool { last.withLock { ContinuousClock.now - $0 >= limit } }
    }
}
