import DeviceTokens
/// The devices a job names itself, each once: its `audience.tokens` as strings, or a streamed
/// body's byte-packed list (sorted). Resolution goes through them in pages and skips registry
/// devices among them, so a device named and also reached through a group is sent once.
public struct ExplicitTokens: Sendable {
    private enum Storage: Sendable {
        case strings([String], Set<String>)
        case packed(DeviceTokenList)
    }

    private let storage: Storage

    /// Keeps the first of each token, in order.
    public init(_ tokens: [String]) {
        var seen = Set<String>()
        seen.reserveCapacity(tokens.count)
        let unique = tokens.filter { seen.insert($0).inserted }
        storage = .strings(unique, seen)
    }

    /// A streamed job's tokens, sorted and deduplicated here.
    public init(_ tokens: consuming DeviceTokenList) {
        var tokens = tokens
        tokens.sortAndRemoveDuplicates()
        storage = .packed(tokens)
    }

    public var count: Int {
        switch storage {
        case .strings(let tokens, _): tokens.count
        case .packed(let tokens): tokens.count
        }
    }

    public func tokens(_ range: Range<Int>) -> [String] {
        switch storage {
        case .strings(let tokens, _): Array(tokens[range])
        case .packed(let tokens): tokens.hex(range)
        }
    }

    /// Hands the memory of the tokens before `index` back to the system (a streamed body's
    /// list; strings stay): for a stream that reads its tokens once, in order, and asks
    /// `contains` of none, as a split of a job that names only tokens does. The tokens of a
    /// million-device job then leave memory as its chunks are made, not after the last one.
    public func discard(upTo index: Int) {
        if case .packed(let tokens) = storage { tokens.discard(upTo: index) }
    }

    public func contains(_ token: String) -> Bool {
        switch storage {
        case .strings(_, let set): set.contains(token)
        case .packed(let tokens): tokens.containsSorted(hex: token)
        }
    }

    /// Consecutive ranges of at most `size` covering every token.
    public func pages(of size: Int) -> [Range<Int>] {
        let size = max(1, size)
        return stride(from: 0, to: count, by: size).map { $0..<min(count, $0 + size) }
    }
}
