import Logging
import PostgresNIO
import Stores

/// One PostgreSQL database and its pool, shared by the registry, the ledger and the schedule kept
/// in it: their statements' transactions, retried when they lost a race with another worker, and
/// their errors as `StoreError`s naming the server's message.
final class PostgresDatabase: Sendable {
    let pool: PostgresPool
    let logger: Logger
    /// The URL without its password, for messages.
    let redactedURL: String
    private var client: PostgresClient { pool.client }

    init(pool: PostgresPool, logger: Logger, redactedURL: String) {
        self.pool = pool
        self.logger = logger
        self.redactedURL = redactedURL
    }

    /// SQLSTATEs worth a second try of the whole transaction: two workers touching the same rows
    /// at once (a serialization failure or deadlock, a key inserted or a user deleted meanwhile).
    private static let transient: Set<String> = ["40001", "40P01", "23503", "23505"]
    /// Tries of a transaction that keeps losing such races (many jobs raising the same devices'
    /// badges at once deadlock now and then, on a loaded host more often).
    private static let attempts = 10

    /// Runs `body` in a transaction, tried again a few times when it lost a race with another
    /// worker; errors become `StoreError`s, the refusals `body` throws kept as they are.
    func transaction(_ body: @escaping (PostgresConnection) async throws -> Void) async throws(StoreError) {
        var attempt = 0
        while true {
            attempt += 1
            do {
                try await client.withConnection { connection in
                    try await connection.query("BEGIN", logger: self.logger)
                    do {
                        try await body(connection)
                    } catch {
                        _ = try? await connection.query("ROLLBACK", logger: self.logger)
                        throw error
                    }
                    try await connection.query("COMMIT", logger: self.logger)
                }
                return
            } catch let error as StoreError {
                throw error
            } catch let error as PSQLError {
                if attempt < Self.attempts, let state = error.serverInfo?[.sqlState], Self.transient.contains(state) {
                    // Apart by a random share of a growing pause: two transactions that
                    // deadlocked would otherwise meet again at the same moment.
                    try? await Task.sleep(for: .milliseconds(Int.random(in: 1...5) * attempt))
                    continue
                }
                throw failure(error)
            } catch {
                throw StoreError(.storeUnavailable, "PostgreSQL registry \(redactedURL): \(error)")
            }
        }
    }

    func read<T: Sendable>(_ body: @escaping (PostgresConnection) async throws -> T) async throws(StoreError) -> T {
        do {
            return try await client.withConnection { connection in try await body(connection) }
        } catch let error as StoreError {
            throw error
        } catch let error as PSQLError {
            throw failure(error)
        } catch {
            throw StoreError(.storeUnavailable, "PostgreSQL registry \(redactedURL): \(error)")
        }
    }

    /// The server's own message when there is one; postgres-nio's description hides it.
    func failure(_ error: PSQLError) -> StoreError {
        if let info = error.serverInfo, let message = info[.message] {
            return StoreError(.storeUnavailable, "PostgreSQL registry \(redactedURL): \(message) (SQLSTATE \(info[.sqlState] ?? "?"))")
        }
        return StoreError(.storeUnavailable, "PostgreSQL registry \(redactedURL): \(error.code)\(error.underlying.map { ": \($0)" } ?? "")")
    }
}

/// A store over a `PostgresDatabase`: its statements go through the database's transactions.
protocol PostgresBacked {
    var database: PostgresDatabase { get }
}

extension PostgresBacked {
    var logger: Logger { database.logger }

    func transaction(_ body: @escaping (PostgresConnection) async throws -> Void) async throws(StoreError) {
        try await database.transaction(body)
    }

    func read<T: Sendable>(_ body: @escaping (PostgresConnection) async throws -> T) async throws(StoreError) -> T {
        try await database.read(body)
    }

    func failure(_ error: PSQLError) -> StoreError { database.failure(error) }
}
