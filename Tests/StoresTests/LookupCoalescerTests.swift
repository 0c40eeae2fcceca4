import Stores
import Synchronization
import TestSupport
import Testing

/// Lookups asked while a query is out are answered by one query together, each with its own items.
@Suite("Lookups asked together")
struct LookupCoalescerTests {
    /// A lookup whose first query waits until the test opens it, counting the queries and their items.
    final class HeldLookup: Sendable {
        let calls = Mutex<[[String]]>([])
        private let gate = OpenOnce()
        let failing: Bool

        init(failing: Bool = false) { self.failing = failing }

        func open() { gate.open() }

        func lookup(_ group: String, _ items: [String]) async throws(StoreError) -> [String: String] {
            let first = calls.withLock { calls in
                calls.append(items)
                return calls.count == 1
            }
            if first { await gate.wait() }
            if failing && !first { throw StoreError(.storeUnavailable, "down") }
            // Odd items are "registered".
            return Dictionary(uniqueKeysWithValues: items.filter { Int($0)! % 2 == 1 }.map { ($0, "\(group):\($0)") })
        }
    }

    /// Waits (a lack of progress, not a total) until `count` lookups are held.
    static func waitForCalls(_ held: HeldLookup, _ count: Int) async {
        for _ in 0..<3000 where held.calls.withLock({ $0.count }) < count { try? await Task.sleep(for: .milliseconds(10)) }
    }

    @Test("twenty lookups while the first is out: asked together, in queries of at most 8 items, each caller answered its own")
    func together() async throws {
        let held = HeldLookup()
        let coalescer = LookupCoalescer<String, String>(maximumItems: 8) { group, items throws(StoreError) in try await held.lookup(group, items) }
        async let first = coalescer.values(group: "demo", items: ["1"])
        await Self.waitForCalls(held, 1)
        let answers = try await withThrowingTaskGroup(of: (Int, [String: String]).self) { group in
            for index in 2...21 {
                group.addTask { (index, try await coalescer.values(group: "demo", items: ["\(index)", "1"])) }
            }
            // Every lookup held before the first query ends.
            try await Task.sleep(for: .milliseconds(200))
            held.open()
            var answers: [Int: [String: String]] = [:]
            for try await (index, found) in group { answers[index] = found }
            return answers
        }
        #expect(try await first == ["1": "demo:1"])
        let calls = held.calls.withLock { $0 }
        #expect(calls.count <= 4, "\(calls)")  // the first, then the rest in queries of at most 8
        #expect(calls.dropFirst().allSatisfy { $0.count <= 8 }, "\(calls)")
        for index in 2...21 {
            var expected = ["1": "demo:1"]
            if index % 2 == 1 { expected["\(index)"] = "demo:\(index)" }
            #expect(answers[index] == expected)
        }
    }

    @Test("a query that fails fails every lookup it answered; the next lookup asks again")
    func failure() async throws {
        let held = HeldLookup(failing: true)
        let coalescer = LookupCoalescer<String, String> { group, items throws(StoreError) in try await held.lookup(group, items) }
        async let first = coalescer.values(group: "demo", items: ["1"])
        await Self.waitForCalls(held, 1)
        func asked(_ item: String) async -> Result<[String: String], StoreError> {
            do throws(StoreError) { return .success(try await coalescer.values(group: "demo", items: [item])) } catch { return .failure(error) }
        }
        async let second = asked("3")
        async let third = asked("5")
        try await Task.sleep(for: .milliseconds(200))
        held.open()
        #expect(try await first == ["1": "demo:1"])
        for answer in await [second, third] {
            guard case .failure(let error) = answer else { Issue.record("answered \(answer)"); continue }
            #expect(error.message == "down")
        }
        #expect(held.calls.withLock { $0.count } == 2)
        // Nothing out: the next lookup is asked at once.
        await #expect(throws: StoreError.self) { try await coalescer.values(group: "demo", items: ["7"]) }
        #expect(held.calls.withLock { $0.count } == 3)
    }
}
