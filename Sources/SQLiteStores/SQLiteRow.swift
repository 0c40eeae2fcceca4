import CSQLite
import Stores
/// The parameters of one run of a statement run many times in a row (a ledger batch), built
/// again for each run in buffers kept between them. Its texts lie end to end in one byte array
/// that SQLite reads in place while the statement runs, instead of copying each into memory of
/// its own (`SQLiteStatement.Value` binds a copy, and makes an array of values per run): a
/// record's dozen texts cost no allocation, here or in SQLite.
struct SQLiteRow {
    enum Slot {
        case text(start: Int, count: Int)
        case integer(Int64)
        case null
    }

    private(set) var bytes: [UInt8] = []
    private(set) var slots: [Slot] = []

    /// Empties the row for the next run, keeping its buffers.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        slots.removeAll(keepingCapacity: true)
    }

    /// The next parameter: the text's UTF-8 bytes (an empty string stays '', not NULL), or NULL.
    mutating func append(_ text: String?) {
        guard let text else {
            slots.append(.null)
            return
        }
        let start = bytes.count
        bytes.append(contentsOf: text.utf8)
        slots.append(.text(start: start, count: bytes.count - start))
    }

    /// The next parameter: the number, or NULL.
    mutating func append(_ integer: Int64?) {
        slots.append(integer.map(Slot.integer) ?? .null)
    }
}
