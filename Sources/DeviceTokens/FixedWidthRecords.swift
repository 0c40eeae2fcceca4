import Glibc

/// Records of one byte width laid back to back, ordered by their bytes (`memcmp`), sorted in
/// place. A million-device job holds its tokens this way: the standard library's sort and glibc's
/// `qsort` both take scratch memory in proportion to the list (half of it, or all of it), which
/// would be the job's memory peak, so this is an introsort that needs one record of scratch.
struct FixedWidthRecords {
    let base: UnsafeMutableRawPointer
    let width: Int
    let count: Int

    /// Quicksort below `depthLimit` levels (twice log2 of the count by default), heapsort past
    /// it, so no input, however arranged, costs more than n log n comparisons.
    func sort(depthLimit: Int? = nil) {
        guard count > 1 else { return }
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: width, alignment: 1)
        defer { scratch.deallocate() }
        let limit = depthLimit ?? 2 * (Int.bitWidth - count.leadingZeroBitCount)
        introsort(0, count, depth: limit, scratch: scratch)
    }

    /// Keeps the first of each run of equal records, moving the rest down; the records kept.
    /// Only meaningful once sorted.
    func removeAdjacentDuplicates() -> Int {
        guard count > 1 else { return count }
        var kept = 1
        for index in 1..<count where compare(kept - 1, index) != 0 {
            if kept != index { base.advanced(by: kept * width).copyMemory(from: record(index), byteCount: width) }
            kept += 1
        }
        return kept
    }

    /// Whether `key` (of this width) is among the sorted records, by binary search.
    func containsSorted(_ key: UnsafeRawPointer) -> Bool {
        var low = 0, high = count
        while low < high {
            let middle = (low + high) / 2
            let order = memcmp(record(middle), key, width)
            if order == 0 { return true }
            if order < 0 { low = middle + 1 } else { high = middle }
        }
        return false
    }

    func record(_ index: Int) -> UnsafeMutableRawPointer { base.advanced(by: index * width) }

    private func compare(_ a: Int, _ b: Int) -> Int32 { memcmp(record(a), record(b), width) }

    private func less(_ a: Int, _ b: Int) -> Bool { compare(a, b) < 0 }

    private func swap(_ a: Int, _ b: Int, _ scratch: UnsafeMutableRawPointer) {
        guard a != b else { return }
        scratch.copyMemory(from: record(a), byteCount: width)
        record(a).copyMemory(from: record(b), byteCount: width)
        record(b).copyMemory(from: scratch, byteCount: width)
    }

    /// Sorts `lower..<upper`: recursion on the smaller side only, so the stack stays log n deep.
    private func introsort(_ lower: Int, _ upper: Int, depth: Int, scratch: UnsafeMutableRawPointer) {
        var lower = lower, upper = upper, depth = depth
        while upper - lower > 16 {
            if depth == 0 {
                heapsort(lower, upper, scratch)
                return
            }
            depth -= 1
            let pivot = partition(lower, upper, scratch)
            if pivot - lower < upper - pivot - 1 {
                introsort(lower, pivot, depth: depth, scratch: scratch)
                lower = pivot + 1
            } else {
                introsort(pivot + 1, upper, depth: depth, scratch: scratch)
                upper = pivot
            }
        }
        insertionSort(lower, upper, scratch)
    }

    /// Hoare's partition around the median of the first, middle and last records; the pivot's
    /// final index. Equal records stop both scans, so a list of one repeated token splits evenly.
    private func partition(_ lower: Int, _ upper: Int, _ scratch: UnsafeMutableRawPointer) -> Int {
        let middle = lower + (upper - lower) / 2, last = upper - 1
        if less(middle, lower) { swap(middle, lower, scratch) }
        if less(last, middle) {
            swap(last, middle, scratch)
            if less(middle, lower) { swap(middle, lower, scratch) }
        }
        // first ≤ middle ≤ last: the median becomes the pivot at `lower`, and `last` (≥ pivot)
        // stops the upward scan.
        swap(middle, lower, scratch)
        var up = lower + 1, down = last
        while true {
            while less(up, lower) { up += 1 }
            while less(lower, down) { down -= 1 }
            if up >= down { break }
            swap(up, down, scratch)
            up += 1
            down -= 1
        }
        swap(lower, down, scratch)
        return down
    }

    private func insertionSort(_ lower: Int, _ upper: Int, _ scratch: UnsafeMutableRawPointer) {
        guard upper - lower > 1 else { return }
        for index in (lower + 1)..<upper {
            guard less(index, index - 1) else { continue }
            scratch.copyMemory(from: record(index), byteCount: width)
            var hole = index
            while hole > lower && memcmp(record(hole - 1), scratch, width) > 0 {
                record(hole).copyMemory(from: record(hole - 1), byteCount: width)
                hole -= 1
            }
            record(hole).copyMemory(from: scratch, byteCount: width)
        }
    }

    private func heapsort(_ lower: Int, _ upper: Int, _ scratch: UnsafeMutableRawPointer) {
        let size = upper - lower
        func siftDown(_ root: Int, _ end: Int) {
            var root = root
            while true {
                var child = 2 * root + 1
                guard child < end else { return }
                if child + 1 < end && less(lower + child, lower + child + 1) { child += 1 }
                guard less(lower + root, lower + child) else { return }
                swap(lower + root, lower + child, scratch)
                root = child
            }
        }
        for root in stride(from: size / 2 - 1, through: 0, by: -1) { siftDown(root, size) }
        for end in stride(from: size - 1, to: 0, by: -1) {
            swap(lower, lower + end, scratch)
            siftDown(0, end)
        }
    }
}
