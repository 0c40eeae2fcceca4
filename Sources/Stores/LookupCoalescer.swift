import Synchronization

/// Answers many small lookups asked at once with one query: while a query of a group (an app)
/// is out, the lookups that come are held, and the next query asks for all their items together.
/// For a store across the network (PostgreSQL), where a one-device job's lookup of its device
/// cost a round trip and a statement of its own; jobs in flight now share them. No timer: a
/// lookup that finds no query out is asked at once. Writes coalesce the same way: a write of
/// many rows answers no values (PostgreSQL's schedule holds the jobs in flight so).
public final class LookupCoalescer<Item: Hashable & Sendable, Value: Sendable>: Sendable {
    /// Looks `items` up in `group`; answers the items found.
    public typealias Lookup = @Sendable (_ group: String, _ items: [Item]) async throws(StoreError) -> [Item: Value]

    private struct Waiter {
        let items: [Item]
        let continuation: CheckedContinuation<Result<[Item: Value], StoreError>?, Never>
    }

    private struct State {
        /// Groups with a query out.
        var running: Set<String> = []
        var queued: [String: [Waiter]] = [:]
    }

    private let state = Mutex(State())
    private let lookup: Lookup
    /// Items asked in one query at most.
    private let maximumItems: Int

    public init(maximumItems: Int = 1000, lookup: @escaping Lookup) {
        self.maximumItems = maximumItems
        self.lookup = lookup
    }

    /// The items of `items` found in `group`, asked together with the lookups waiting beside it.
    public func values(group: String, items: [Item]) async throws(StoreError) -> [Item: Value] {
        if !state.withLock({ state in state.running.insert(group).inserted }) {
            let answer = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[Item: Value], StoreError>?, Never>) in
                let leadNow = state.withLock { state -> Bool in
                    // The query out ended meanwhile, with nobody waiting: ask this one now.
                    if state.running.insert(group).inserted { return true }
                    state.queued[group, default: []].append(Waiter(items: items, continuation: continuation))
                    return false
                }
                if leadNow { continuation.resume(returning: nil) }
            }
            if let answer { return try answer.get() }
        }
        let answer = await ask(group, items)
        ended(group)
        return try answer.get()
    }

    private func ask(_ group: String, _ items: [Item]) async -> Result<[Item: Value], StoreError> {
        do throws(StoreError) {
            guard items.count > maximumItems else { return .success(try await lookup(group, items)) }
            var found: [Item: Value] = [:]
            for start in stride(from: 0, to: items.count, by: maximumItems) {
                found.merge(try await lookup(group, Array(items[start..<min(start + maximumItems, items.count)]))) { first, _ in first }
            }
            return .success(found)
        } catch {
            return .failure(error)
        }
    }

    /// A query of `group` ended: the lookups held meanwhile are asked next, in a task of their own
    /// (the caller that asked the last query goes on with its answer).
    private func ended(_ group: String) {
        let more = state.withLock { state -> Bool in
            if state.queued[group]?.isEmpty ?? true {
                state.running.remove(group)
                return false
            }
            return true
        }
        if more { Task { await self.drain(group) } }
    }

    private func drain(_ group: String) async {
        while true {
            let waiters = state.withLock { state -> [Waiter] in
                let waiters = state.queued.removeValue(forKey: group) ?? []
                if waiters.isEmpty { state.running.remove(group) }
                return waiters
            }
            guard !waiters.isEmpty else { return }
            var seen = Set<Item>()
            let items = waiters.flatMap(\.items).filter { seen.insert($0).inserted }
            let answer = await ask(group, items)
            for waiter in waiters {
                waiter.continuation.resume(returning: answer.map { found in
                    waiter.items.reduce(into: [Item: Value]()) { mine, item in mine[item] = found[item] }
                })
            }
        }
    }
}
