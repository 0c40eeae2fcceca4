import Stores
import CSQLite
import Glibc

/// One SQLite connection: the only owner of the C handle, closed on deinit. Not thread-safe by
/// itself, and opened without SQLite's own mutex (a lock per column read): its store serialises
/// every use of the writers' connection behind a lock, and a reader is used by one task at a time.
final class SQLiteDatabase {
    private let handle: OpaquePointer
    let path: String

    /// Opens (creating) the file in WAL mode, so workers on one host share it: readers never wait
    /// for the writer, and writers wait up to `busyTimeout` for each other instead of failing.
    /// - Parameter pageSize: the page size of a file this open creates (an existing file keeps its own).
    init(path: String, pageSize: Int = 16_384, busyTimeoutMilliseconds: Int32 = 10_000) throws(StoreError) {
        _ = Self.memoryStatistics
        var handle: OpaquePointer?
        let status = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let handle { sqlite3_close_v2(handle) }
            throw StoreError(.storeUnavailable, "cannot open the SQLite registry '\(path)': \(message)")
        }
        self.handle = handle
        self.path = path
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        // For a new file only (an existing one keeps its own): larger pages make the b-trees of a
        // million members shallower, so each member costs fewer page visits. Must precede WAL.
        // A file of many small random writes (the ledger) wants smaller ones: see its store.
        try execute("PRAGMA page_size = \(pageSize)")
        try enterWAL(waitingUpTo: busyTimeoutMilliseconds)
        try execute("PRAGMA synchronous = NORMAL")
        try execute("PRAGMA foreign_keys = ON")
    }

    /// `PRAGMA journal_mode = WAL`, tried again while another connection holds the file: the
    /// change of journal mode answers SQLITE_BUSY at once, without the busy handler, so two
    /// workers opening a new file at the same moment would otherwise have one fail its start.
    private func enterWAL(waitingUpTo milliseconds: Int32) throws(StoreError) {
        var waited: Int32 = 0
        while true {
            let status = sqlite3_exec(handle, "PRAGMA journal_mode = WAL", nil, nil, nil)
            if status == SQLITE_OK { return }
            guard status == SQLITE_BUSY || status == SQLITE_LOCKED, waited < milliseconds else {
                throw failure("PRAGMA journal_mode = WAL")
            }
            usleep(10_000)
            waited += 10
        }
    }

    /// SQLite's process-wide settings, made once before its first open (SQLITE_OK, or
    /// SQLITE_MISUSE when something in the process opened a database first).
    private static let memoryStatistics: Int32 = pw_sqlite3_skip_memory_statistics()

    deinit {
        sqlite3_close_v2(handle)
    }

    /// Runs SQL with no parameters and no rows to read (schema, pragmas, transactions).
    func execute(_ sql: String) throws(StoreError) {
        var error: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &error)
        guard status == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(error)
            throw StoreError(.storeUnavailable, "SQLite registry '\(path)': \(message) (in: \(sql.prefix(80)))")
        }
    }

    func prepare(_ sql: String) throws(StoreError) -> SQLiteStatement {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK, let statement else {
            throw failure("preparing \(sql.prefix(80))")
        }
        return SQLiteStatement(statement, database: self)
    }

    /// Runs `body` in one transaction (immediate, so two writers queue at its start rather than
    /// fail half-way), rolled back if it throws.
    func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    func failure(_ context: String) -> StoreError {
        StoreError(.storeUnavailable, "SQLite registry '\(path)': \(context): \(String(cString: sqlite3_errmsg(handle)))")
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
}
