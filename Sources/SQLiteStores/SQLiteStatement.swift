import Stores
import CSQLite

/// A prepared statement, kept for the life of its store and reset after each use.
final class SQLiteStatement {
    private let statement: OpaquePointer
    private unowned let database: SQLiteDatabase

    init(_ statement: OpaquePointer, database: SQLiteDatabase) {
        self.statement = statement
        self.database = database
    }

    deinit {
        sqlite3_finalize(statement)
    }

    enum Value {
        case text(String)
        case integer(Int64)
        case real(Double)
        case null
    }

    /// Binds `values` to ?1, ?2…, runs the statement and hands each row to `row`; always resets.
    func run(_ values: [Value], row: (Row) throws(StoreError) -> Void = { _ in }) throws(StoreError) {
        defer { reset() }
        try bind(values)
        while let current = try step() { try row(current) }
    }

    /// Binds `values` to ?1, ?2… for rows read one `step` at a time: a result read across
    /// suspension points by the one task that holds the connection. Reset it when done.
    func bind(_ values: [Value]) throws(StoreError) {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32
            switch value {
            case .text(var text):
                // The string's own bytes (SQLite copies them): no C string made per value.
                status = text.withUTF8 { bytes in
                    bytes.withMemoryRebound(to: CChar.self) { pw_sqlite3_bind_text_copy(statement, index, $0.baseAddress, Int32($0.count)) }
                }
            case .integer(let number): status = sqlite3_bind_int64(statement, index, number)
            case .real(let number): status = sqlite3_bind_double(statement, index, number)
            case .null: status = sqlite3_bind_null(statement, index)
            }
            guard status == SQLITE_OK else { throw database.failure("binding parameter \(index)") }
        }
    }

    /// Binds `row` to ?1, ?2…, runs the statement to its end (rows it returns are not read) and
    /// resets it. The texts are bound without a copy: SQLite reads them in place while the
    /// statement runs, within the one scope where their address is valid, and the reset there
    /// clears the bindings before it ends.
    func run(_ row: SQLiteRow) throws(StoreError) {
        let outcome: Result<Void, StoreError> = row.bytes.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { texts in
                defer { reset() }
                for (offset, slot) in row.slots.enumerated() {
                    let index = Int32(offset + 1)
                    let status: Int32
                    switch slot {
                    case .text(let start, let count):
                        // An empty buffer may have no address; the shim binds '' for it, never NULL.
                        status = pw_sqlite3_bind_text_borrowed(statement, index, texts.baseAddress.map { $0 + start }, Int32(count))
                    case .integer(let number): status = sqlite3_bind_int64(statement, index, number)
                    case .null: status = sqlite3_bind_null(statement, index)
                    }
                    guard status == SQLITE_OK else { return .failure(database.failure("binding parameter \(index)")) }
                }
                return Result { () throws(StoreError) in
                    while try step() != nil {}
                }
            }
        }
        try outcome.get()
    }

    /// The next row, valid until the next step or reset; nil when there are no more.
    func step() throws(StoreError) -> Row? {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return Row(statement: statement)
        case SQLITE_DONE: return nil
        default: throw database.failure("running a statement")
        }
    }

    func reset() {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }

    /// The current row; valid until the statement steps again or is reset.
    struct Row {
        fileprivate let statement: OpaquePointer

        func text(_ column: Int32) -> String? {
            guard let bytes = sqlite3_column_text(statement, column) else { return nil }  // NULL
            let count = Int(sqlite3_column_bytes(statement, column))
            return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }

        func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
        func real(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }
        /// A device's platform column: APNs unless it says FCM.
        func platform(_ column: Int32) -> DevicePlatform { text(column) == DevicePlatform.fcm.rawValue ? .fcm : .apns }
    }
}
