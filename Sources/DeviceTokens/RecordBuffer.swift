import Glibc
import Synchronization

/// Bytes in an anonymous mapping of their own, whose leading pages can be handed back to the
/// system while the rest is still in use. A million-device job's tokens (32 MB) are given back
/// page by page as the split reads them, rather than all at its end, which is what set the
/// worker's memory peak (the split overlaps this worker's own sending of the first chunks).
///
/// Appended to by one task while a job is read, then only read (and discarded from the front);
/// `DeviceTokenList` copies it before a write when it is shared.
final class RecordBuffer: @unchecked Sendable {
    private(set) var base: UnsafeMutableRawPointer
    private(set) var count = 0
    private var capacity: Int
    /// Bytes from the start that were handed back; reading them would see zeros.
    private let discarded = Atomic<Int>(0)

    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Maps room for `bytes` (at least a page). Untouched pages cost address space, not memory.
    init(reserving bytes: Int) {
        capacity = Self.roundedUp(max(bytes, 1))
        base = Self.map(capacity)
    }

    deinit {
        munmap(base, capacity)
    }

    var discardedBytes: Int { discarded.load(ordering: .acquiring) }

    func copy() -> RecordBuffer {
        precondition(discardedBytes == 0, "a token list is copied after tokens were handed back")
        let copy = RecordBuffer(reserving: count)
        copy.append(UnsafeRawBufferPointer(start: base, count: count))
        return copy
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        if count + bytes.count > capacity { grow(to: count + bytes.count) }
        if let source = bytes.baseAddress { base.advanced(by: count).copyMemory(from: source, byteCount: bytes.count) }
        count += bytes.count
    }

    /// Drops the last bytes, handing back the whole pages they leave unused (a job's
    /// duplicate tokens, once sorted out).
    func removeLast(_ bytes: Int) {
        let used = Self.roundedUp(count - bytes), touched = Self.roundedUp(count)
        if touched > used { madvise(base.advanced(by: used), touched - used, MADV_DONTNEED) }
        count -= bytes
    }

    /// Hands back the whole pages below `offset`: nobody reads those bytes again.
    func discard(upTo offset: Int) {
        let end = min(offset, count) / Self.pageSize * Self.pageSize
        let start = discardedBytes
        guard end > start else { return }
        madvise(base.advanced(by: start), end - start, MADV_DONTNEED)
        discarded.store(end, ordering: .releasing)
    }

    /// A new mapping twice as large (or as large as needed), the bytes copied over: only when
    /// a job's size was not known beforehand.
    private func grow(to needed: Int) {
        let grown = Self.roundedUp(max(needed, capacity * 2))
        let mapped = Self.map(grown)
        mapped.copyMemory(from: base, byteCount: count)
        munmap(base, capacity)
        base = mapped
        capacity = grown
    }

    private static func roundedUp(_ bytes: Int) -> Int {
        (bytes + pageSize - 1) / pageSize * pageSize
    }

    private static func map(_ bytes: Int) -> UnsafeMutableRawPointer {
        // MAP_NORESERVE: the reservation is for the worst case (a body of nothing but tokens).
        let mapped = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        guard let mapped, mapped != MAP_FAILED else { fatalError("cannot map \(bytes) bytes for a job's tokens: \(String(cString: strerror(errno)))") }
        return mapped
    }
}
