import Foundation
@testable import DeviceTokens
import Testing

@Suite("Device tokens as bytes")
struct DeviceTokenListTests {
    @Test("tokens of any valid length come back as lowercase hex, in order within a length; sorting keeps one of each")
    func roundTrip() {
        let tokens = ["0123456789ABCDEF", String(repeating: "ab", count: 32), String(repeating: "f0", count: 200), "0123456789abcdef", "00000000000000ff"]
        var list = DeviceTokenList()
        list.reserve(forBodyOf: 1000)
        for token in tokens { list.append(hex: token) }
        #expect(list.count == 5)
        // Grouped by length, shortest first; the order they came within each length.
        #expect(list.hex(0..<list.count) == ["0123456789abcdef", "0123456789abcdef", "00000000000000ff", String(repeating: "ab", count: 32), String(repeating: "f0", count: 200)])
        list.sortAndRemoveDuplicates()
        #expect(list.hex(0..<list.count) == ["00000000000000ff", "0123456789abcdef", String(repeating: "ab", count: 32), String(repeating: "f0", count: 200)])
        #expect(list.containsSorted(hex: "0123456789ABCDEF"))
        #expect(list.containsSorted(hex: String(repeating: "F0", count: 200)))
        #expect(!list.containsSorted(hex: "0123456789abcdee"))
        #expect(!list.containsSorted(hex: String(repeating: "ab", count: 31)))
        #expect(!list.containsSorted(hex: "not hex!"))
    }

    @Test("a copy is a value: appending to one list or sorting it leaves the other as it was")
    func copies() {
        var list = DeviceTokenList()
        for token in ["02", "01"] { list.append(hex: token) }
        var copy = list
        copy.append(hex: "03")
        copy.sortAndRemoveDuplicates()
        #expect(list.hex(0..<list.count) == ["02", "01"])
        #expect(copy.hex(0..<copy.count) == ["01", "02", "03"])
    }

    @Test("tokens handed back leave every later token intact, across lengths and page boundaries")
    func discard() {
        var list = DeviceTokenList()
        list.reserve(forBodyOf: 3_000_000)
        // 40,000 tokens of 32 bytes (1.28 MB, over 300 pages) and 1,000 of 8 bytes, which come first.
        let long = (0..<40_000).map { String(format: "%064x", $0 &* 2_654_435_761) }
        let short = (0..<1000).map { String(format: "%016x", $0) }
        for token in long + short { list.append(hex: token) }
        let expected = short + long
        list.discard(upTo: 500)
        #expect(list.hex(500..<1000) == Array(expected[500..<1000]))
        // Pages of the size a split reads, some ending mid-page.
        for start in stride(from: 1000, to: expected.count, by: 997) {
            let range = start..<min(start + 997, expected.count)
            #expect(list.hex(range) == Array(expected[range]), "\(range)")
            list.discard(upTo: range.upperBound)
        }
        #expect(list.count == expected.count)
    }

    /// Arrangements a quicksort meets badly: sorted, reversed, one token repeated, few distinct
    /// values, an organ pipe, and random tokens with duplicates.
    static let arrangements: [(String, [Int])] = {
        var generator = SystemRandomNumberGenerator()
        let count = 5000
        return [
            ("sorted", Array(0..<count)),
            ("reversed", Array((0..<count).reversed())),
            ("one value", Array(repeating: 7, count: count)),
            ("three values", (0..<count).map { $0 % 3 }),
            ("organ pipe", (0..<count).map { min($0, count - $0) }),
            ("random with duplicates", (0..<count).map { _ in Int.random(in: 0..<(count / 2), using: &generator) }),
        ]
    }()

    @Test("sorting in place matches the standard library's order and removes exactly the duplicates", arguments: 0..<6)
    func sortsLikeTheStandardLibrary(arrangement: Int) {
        let (name, values) = Self.arrangements[arrangement]
        // Values spread over all 32 bytes, so records differ in more than their last byte.
        let tokens = values.map { value in (0..<8).map { String(format: "%08x", UInt32(truncatingIfNeeded: value &* (2_654_435_761 &+ $0))) }.joined() }
        var list = DeviceTokenList()
        for token in tokens { list.append(hex: token) }
        list.sortAndRemoveDuplicates()
        let expected = Set(tokens).sorted()
        #expect(list.count == expected.count, "\(name)")
        #expect(list.hex(0..<list.count) == expected, "\(name)")
        #expect(tokens.prefix(50).allSatisfy { list.containsSorted(hex: $0) }, "\(name)")
    }

    @Test("the heapsort that bounds a quicksort gone deep sorts as well", arguments: [0, 1, 3])
    func heapsortFallback(depthLimit: Int) {
        let values = (0..<3000).map { ($0 &* 7919) % 1013 }
        var bytes = values.flatMap { value in withUnsafeBytes(of: UInt32(value).bigEndian) { Array($0) } + [UInt8(value % 5)] }
        bytes.withUnsafeMutableBytes { raw in
            FixedWidthRecords(base: raw.baseAddress!, width: 5, count: values.count).sort(depthLimit: depthLimit)
        }
        let records = stride(from: 0, to: bytes.count, by: 5).map { Array(bytes[$0..<($0 + 5)]) }
        #expect(records == values.sorted().map { value in withUnsafeBytes(of: UInt32(value).bigEndian) { Array($0) } + [UInt8(value % 5)] })
    }
}
