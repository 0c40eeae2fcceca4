import DeviceTokens
import Synchronization
import Stores
/// The devices a job names itself, each once: its `audience.tokens` as strings, or a streamed
/// body's byte-packed list (sorted), then its `audience.fcm_tokens`. Resolution goes through them
/// in pages and skips registry devices among them, so a device named and also reached through a
/// group is sent once; a job of many Android tokens is split into chunk jobs as any other.
public struct ExplicitTokens: Sendable {
    private enum Storage: Sendable {
        case strings([String], Set<String>)
        case packed(DeviceTokenList)
    }

    private let storage: Storage
    /// APNs' tokens, before the Android ones in the order of `tokens(_:)`.
    private let apnsCount: Int
    /// Android devices' registration tokens (deduplicated by the decoder), after APNs' ones.
    private let android: [String]
    /// Made at the first `contains` (a job with users or groups beside its tokens): a job of
    /// Android tokens alone holds no second copy of them.
    private let androidSet: LazySet

    /// Keeps the first of each token, in order.
    public init(_ tokens: [String], android: [String] = []) {
        var seen = Set<String>()
        seen.reserveCapacity(tokens.count)
        let unique = tokens.filter { seen.insert($0).inserted }
        storage = .strings(unique, seen)
        apnsCount = unique.count
        self.android = android
        androidSet = LazySet(android)
    }

    /// A streamed job's tokens, sorted and deduplicated here.
    public init(_ tokens: consuming DeviceTokenList, android: [String] = []) {
        var tokens = tokens
        tokens.sortAndRemoveDuplicates()
        apnsCount = tokens.count
        storage = .packed(tokens)
        self.android = android
        androidSet = LazySet(android)
    }

    public var count: Int { apnsCount + android.count }

    /// The tokens at `range`: APNs' first, then Android devices' (`platform(at:)`).
    public func tokens(_ range: Range<Int>) -> [String] {
        let apns = range.clamped(to: 0..<apnsCount)
        var tokens: [String]
        switch storage {
        case .strings(let all, _): tokens = Array(all[apns])
        case .packed(let all): tokens = apns.isEmpty ? [] : all.hex(apns)
        }
        let androidRange = range.clamped(to: apnsCount..<count)
        if !androidRange.isEmpty { tokens += android[(androidRange.lowerBound - apnsCount)..<(androidRange.upperBound - apnsCount)] }
        return tokens
    }

    /// The service the token at `index` is named for.
    public func platform(at index: Int) -> DevicePlatform { index < apnsCount ? .apns : .fcm }

    /// The devices at `range` as recipients, each on its service.
    func recipients(_ range: Range<Int>) -> [Recipient] {
        zip(range, tokens(range)).map { Recipient(token: $1, platform: platform(at: $0)) }
    }

    /// Hands the memory of the tokens before `index` back to the system (a streamed body's
    /// list; strings stay): for a stream that reads its tokens once, in order, and asks
    /// `contains` of none, as a split of a job that names only tokens does. The tokens of a
    /// million-device job then leave memory as its chunks are made, not after the last one.
    public func discard(upTo index: Int) {
        if case .packed(let tokens) = storage { tokens.discard(upTo: min(index, apnsCount)) }
    }

    public func contains(_ token: String) -> Bool {
        if !android.isEmpty, androidSet.contains(token) { return true }
        switch storage {
        case .strings(_, let set): return set.contains(token)
        case .packed(let tokens): return tokens.containsSorted(hex: token)
        }
    }

    /// Consecutive ranges of at most `size` covering every token.
    public func pages(of size: Int) -> [Range<Int>] {
        let size = max(1, size)
        return stride(from: 0, to: count, by: size).map { $0..<min(count, $0 + size) }
    }
}

/// A set of strings made when first asked.
private final class LazySet: Sendable {
    private let elements: [String]
    private let set = Mutex<Set<String>?>(nil)

    init(_ elements: [String]) {
        self.elements = elements
    }

    func contains(_ element: String) -> Bool {
        set.withLock { set in
            if set == nil { set = Set(elements) }
            return set!.contains(element)
        }
    }
}
