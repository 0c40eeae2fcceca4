/// Device tokens held as bytes, not hex strings, and without a per-token offset or length: tokens
/// of one length are fixed-width records back to back. A million 32-byte tokens take 32 MB here
/// against ~120 MB as `[String]`, which is what lets a worker take a million-device job.
///
/// Tokens keep the order they came in among those of their length (APNs tokens are all 32 bytes
/// today, so in practice one order) until `sortAndRemoveDuplicates`.
public struct DeviceTokenList: Sendable {
    /// The tokens of one byte length.
    private struct Run: Sendable {
        let width: Int
        var buffer: RecordBuffer
        var count: Int { buffer.count / width }

        /// Copy on write: the buffer is a reference.
        mutating func unique() {
            if !isKnownUniquelyReferenced(&buffer) { buffer = buffer.copy() }
        }
    }

    /// By width, shortest first.
    private var runs: [Run] = []
    /// Bytes to reserve for the first run: one allocation the size of the job's tokens, not a
    /// series of doublings each copying the last.
    private var reservation = 0

    public init() {}

    /// Room for the tokens of a JSON body of `bodySize` bytes: a token's bytes are never more
    /// than half its quoted hex. Untouched, the reservation costs address space, not memory.
    public mutating func reserve(forBodyOf bodySize: Int) {
        reservation = bodySize / 2 + 1
    }

    public var count: Int { runs.reduce(0) { $0 + $1.count } }
    public var isEmpty: Bool { runs.isEmpty }

    /// Appends a token given as hex (upper or lower case), already validated by the caller
    /// (`APNsDeviceToken.validate`, the one rule for a token's length): the list only needs
    /// whole bytes, and keeps no length limit of its own to drift from that rule.
    ///
    /// A `String`, not any collection of bytes: the callers are in another module, where a
    /// generic method is not specialized and pays a witness-table call per byte (64 per token,
    /// every token of a streamed job). `bench e2e` showed the worker's CPU per device up by about
    /// 6 % until this took a `String`.
    public mutating func append(hex: String) {
        var hex = hex
        hex.withUTF8 { append(hexBytes: $0) }
    }

    private mutating func append(hexBytes hex: UnsafeBufferPointer<UInt8>) {
        precondition(hex.count % 2 == 0 && hex.count > 0, "validate tokens before storing them")
        let width = hex.count / 2
        let index = runIndex(width)
        // Decoded on the stack, then appended at once: one check of the run's storage per token,
        // not one per byte.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: width) { bytes in
            var position = hex.startIndex
            for offset in 0..<width {
                let high = Self.value(of: hex[position])
                position = hex.index(after: position)
                bytes[offset] = high << 4 | Self.value(of: hex[position])
                position = hex.index(after: position)
            }
            runs[index].unique()
            runs[index].buffer.append(UnsafeRawBufferPointer(bytes))
        }
    }

    /// The token at `index` as lowercase hex, as APNs and the results spell it.
    public subscript(index: Int) -> String {
        var index = index
        for run in runs {
            guard index >= run.count else { return Self.hex(of: run, at: index) }
            index -= run.count
        }
        preconditionFailure("token index out of range")
    }

    /// The tokens of `range`, as hex.
    public func hex(_ range: Range<Int>) -> [String] {
        range.map { self[$0] }
    }

    /// Hands the memory of the tokens before `index` back to the system, whole pages of it:
    /// whoever holds this list or a copy of it reads none of them again (reading one stops the
    /// process rather than see a wrong token). For a job's split, which reads its tokens once,
    /// in order.
    public func discard(upTo index: Int) {
        var index = index
        for run in runs {
            run.buffer.discard(upTo: min(index, run.count) * run.width)
            index -= min(index, run.count)
        }
    }

    /// Orders the tokens (by length, then by their bytes) and keeps one of each, in place: a job
    /// sends each device once however often it names it, with no set of every token beside the
    /// list and no scratch copy of it.
    public mutating func sortAndRemoveDuplicates() {
        for index in runs.indices {
            runs[index].unique()
            let run = runs[index]
            let records = FixedWidthRecords(base: run.buffer.base, width: run.width, count: run.count)
            records.sort()
            let kept = records.removeAdjacentDuplicates()
            run.buffer.removeLast(run.buffer.count - kept * run.width)
        }
    }

    /// Whether `hex` is in the list, by binary search: only after `sortAndRemoveDuplicates`.
    public func containsSorted(hex: String) -> Bool {
        let utf8 = Array(hex.utf8)
        guard !utf8.isEmpty, utf8.count % 2 == 0, utf8.allSatisfy({ $0.isHexDigit }),
            let run = runs.first(where: { $0.width == utf8.count / 2 })
        else { return false }
        precondition(run.buffer.discardedBytes == 0, "a token list is searched after tokens were handed back")
        let key = stride(from: 0, to: utf8.count, by: 2).map { Self.value(of: utf8[$0]) << 4 | Self.value(of: utf8[$0 + 1]) }
        return key.withUnsafeBytes { key in
            // Only read: the search writes nothing through the pointer.
            FixedWidthRecords(base: run.buffer.base, width: run.width, count: run.count).containsSorted(key.baseAddress!)
        }
    }

    /// The run of tokens `width` bytes long, made on first use.
    private mutating func runIndex(_ width: Int) -> Int {
        if let index = runs.firstIndex(where: { $0.width >= width }), runs[index].width == width { return index }
        // The first run gets the job's reservation; a second length (rare) grows as it goes.
        let run = Run(width: width, buffer: RecordBuffer(reserving: runs.isEmpty ? reservation : width * 64))
        let index = runs.firstIndex(where: { $0.width > width }) ?? runs.endIndex
        runs.insert(run, at: index)
        return index
    }

    private static func hex(of run: Run, at index: Int) -> String {
        let start = index * run.width
        precondition(start >= run.buffer.discardedBytes, "a token is read after it was handed back")
        let bytes = run.buffer.base.advanced(by: start).assumingMemoryBound(to: UInt8.self)
        return String(unsafeUninitializedCapacity: run.width * 2) { buffer in
            for offset in 0..<run.width {
                let byte = bytes[offset]
                buffer[offset * 2] = digits[Int(byte >> 4)]
                buffer[offset * 2 + 1] = digits[Int(byte & 0x0F)]
            }
            return run.width * 2
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
