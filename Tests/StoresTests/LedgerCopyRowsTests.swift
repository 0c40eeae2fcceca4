import NIOCore
@testable import PostgresStores
import Stores
import Testing

/// The COPY rows are written by hand (numbers as digits in place, escapes by byte): each field
/// exactly as PostgreSQL's text format reads it back.
@Suite("PostgreSQL ledger COPY rows")
struct LedgerCopyRowsTests {
    static func row(_ record: DeliveryRecord) -> String {
        var buffer = LedgerCopyRows.buffer([record])
        return buffer.readString(length: buffer.readableBytes) ?? ""
    }

    @Test("numbers of every width, nulls, and the four escaped characters")
    func fields() {
        var record = DeliveryRecord(jobID: "j\t1\\N", app: "demo", token: "ab", outcome: "failed", status: nil, attempts: 0, at: 0)
        record.chunk = nil
        record.reason = "Bad\r\nReason é"
        #expect(Self.row(record) == "j\\t1\\\\N\tdemo\tab\t\\N\t\\N\tfailed\t\\N\tBad\\r\\nReason é\t\\N\t\\N\t0\t0\t0\t\\N\t\\N\t\\N\t\\N\n")

        for (at, text) in [(Int64(9), "9"), (10, "10"), (99, "99"), (100, "100"), (1_795_000_000_000, "1795000000000"),
                           (Int64.max, "9223372036854775807"), (-86_400_001, "-86400001"), (Int64.min, "-9223372036854775808")] {
            let record = DeliveryRecord(jobID: "j", app: "a", token: "t", outcome: "delivered", status: 200, attempts: 12, at: at)
            let fields = Self.row(record).dropLast().split(separator: "\t", omittingEmptySubsequences: false)
            #expect(fields[6] == "200" && fields[10] == "12")
            #expect(fields[11] == Substring(text), "at \(at)")
            #expect(fields[12] == Substring(String(DeliveryRecord.day(ofMilliseconds: at))), "day of \(at)")
            #expect(fields.count == PostgresLedgerStore.copyColumns.count)
        }
    }

    @Test("several records, one line each, in order")
    func rows() {
        let records = (0..<3).map { DeliveryRecord(jobID: "j", app: "a", token: "t\($0)", outcome: "delivered", status: 200, attempts: 1, at: Int64($0)) }
        var buffer = LedgerCopyRows.buffer(records)
        let lines = (buffer.readString(length: buffer.readableBytes) ?? "").split(separator: "\n")
        #expect(lines.map { $0.split(separator: "\t", omittingEmptySubsequences: false)[2] } == ["t0", "t1", "t2"])
    }

    @Test("APNs' timestamp and the results message, the last two columns")
    func timestampAndMessage() {
        var record = DeliveryRecord(jobID: "j", app: "a", token: "t", outcome: "rejected", status: 410, attempts: 1, at: 5)
        record.timestamp = 1_795_000_000_123
        record.resultsMessage = -42
        #expect(Self.row(record).hasSuffix("\t1795000000123\t-42\n"))
    }
}
