/// Device tokens held as bytes, not hex strings: a million 32-byte tokens take ~37 MB here
/// against ~120 MB as `[String]`, which is what lets a worker take a million-device job.
public struct DeviceTokenList: Sendable {
    /// Each token as a length byte, then its bytes.
    private var storage: [UInt8] = []
    /// Where each token starts in `storage`, in the order they came (until `sortAndRemoveDuplicates`).
    private var starts: [UInt32] = []

    public init() {}

    /// Room for the tokens of a JSON body of `bodySize` bytes: a token's bytes plus its length
    /// byte are never more than half its quoted hex and separator.
    public mutating func reserve(forBodyOf bodySize: Int) {
        storage.reserveCapacity(bodySize / 2 + 1)
        starts.reserveCapacity(bodySize / 19 + 1)
    }

    public var count: Int { starts.count }
    public var isEmpty: Bool { starts.isEmpty }

    /// Appends a token given as hex (upper or lower case), already validated as even-length hex
    /// of at most 400 digits.
    public mutating func append(hex: some Collection<UInt8>) {
        precondition(hex.count % 2 == 0 && hex.count <= 510, "validate tokens before storing them")
        starts.append(UInt32(storage.count))
        storage.append(UInt8(hex.count / 2))
        var high: UInt8?
        for digit in hex {
            let value = Self.value(of: digit)
            if let first = high {
                storage.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        precondition(storage.count <= UInt32.max, "more than 4 GiB of tokens")
    }

    /// The token at `index` as lowercase hex, as APNs and the results spell it.
    public subscript(index: Int) -> String {
        let start = Int(starts[index])
        let length = Int(storage[start])
        return String(unsafeUninitializedCapacity: length * 2) { buffer in
            for offset in 0..<length {
                let byte = storage[start + 1 + offset]
                buffer[offset * 2] = Self.digits[Int(byte >> 4)]
                buffer[offset * 2 + 1] = Self.digits[Int(byte & 0x0F)]
            }
            return length * 2
        }
    }

    /// The tokens of `range`, as hex.
    public func hex(_ range: Range<Int>) -> [String] {
        range.map { self[$0] }
    }

    /// Orders the tokens by their bytes and keeps one of each, in place: a job sends each
    /// device once however often it names it, with no set of every token beside the list.
    public mutating func sortAndRemoveDuplicates() {
        storage.withUnsafeBufferPointer { bytes in
            func token(_ start: UInt32) -> UnsafeBufferPointer<UInt8> {
                let start = Int(start)
                return UnsafeBufferPointer(rebasing: bytes[(start + 1)..<(start + 1 + Int(bytes[start]))])
            }
            starts.sort { token($0).lexicographicallyPrecedes(token($1)) }
            var kept = 0
            for index in starts.indices {
                if kept > 0 && token(starts[kept - 1]).elementsEqual(token(starts[index])) { continue }
                starts[kept] = starts[index]
                kept += 1
            }
            starts.removeLast(starts.count - kept)
        }
    }

    /// Whether `hex` is in the list, by binary search: only after `sortAndRemoveDuplicates`.
    public func containsSorted(hex: String) -> Bool {
        var wanted = DeviceTokenList()
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0, utf8.count <= 510, utf8.allSatisfy({ $0.isHexDigit }) else { return false }
        wanted.append(hex: utf8)
        return storage.withUnsafeBufferPointer { bytes in
            wanted.storage.withUnsafeBufferPointer { target in
                let key = UnsafeBufferPointer(rebasing: target[1...])
                var low = 0, high = starts.count
                while low < high {
                    let middle = (low + high) / 2
                    let start = Int(starts[middle])
                    let token = UnsafeBufferPointer(rebasing: bytes[(start + 1)..<(start + 1 + Int(bytes[start]))])
                    if token.elementsEqual(key) { return true }
                    if token.lexicographicallyPrecedes(key) { low = middle + 1 } else { high = middle }
                }
                return false
            }
        }
    }

    private static let digits = Array("0123456789abcdef".utf8)

    private static func value(of digit: UInt8) -> UInt8 {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: digit - UInt8(ascii: "A") + 10
        }
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}
