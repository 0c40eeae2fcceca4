import Testing

/// Test traits that share the one test broker safely across every test target in the process:
/// tests marked `.usesBroker` run side by side, and a test marked `.restartsBroker` runs alone,
/// because stopping the broker would break whatever else is talking to it.
public struct BrokerAccessTrait: TestTrait, SuiteTrait, TestScoping {
    let exclusive: Bool

    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Suites get the trait recursively; only the tests themselves take the lock.
        guard !test.isSuite else { return try await function() }
        TestLog.bootstrap()
        try await BrokerLock.shared.run(exclusive: exclusive, function)
    }
}

extension Trait where Self == BrokerAccessTrait {
    /// The test talks to the broker and tolerates others doing so at the same time.
    public static var usesBroker: Self { BrokerAccessTrait(exclusive: false) }
    /// The test stops or restarts the broker: nothing else may use it meanwhile.
    public static var restartsBroker: Self { BrokerAccessTrait(exclusive: true) }
}

/// A readers-writer lock for async code, with writers served in arrival order so a restarting
/// test is not starved by a steady stream of ordinary ones.
actor BrokerLock {
    static let shared = BrokerLock()

    private var readers = 0
    private var writer = false
    private var queue: [(exclusive: Bool, continuation: CheckedContinuation<Void, Never>)] = []

    func run(exclusive: Bool, _ body: @Sendable () async throws -> Void) async throws {
        await acquire(exclusive: exclusive)
        do {
            try await body()
        } catch {
            release(exclusive: exclusive)
            throw error
        }
        release(exclusive: exclusive)
    }

    private func acquire(exclusive: Bool) async {
        if queue.isEmpty && !writer && (!exclusive || readers == 0) {
            if exclusive { writer = true } else { readers += 1 }
            return
        }
        await withCheckedContinuation { queue.append((exclusive, $0)) }
    }

    private func release(exclusive: Bool) {
        if exclusive { writer = false } else { readers -= 1 }
        while let next = queue.first, !writer, !next.exclusive || readers == 0 {
            queue.removeFirst()
            if next.exclusive { writer = true } else { readers += 1 }
            next.continuation.resume()
            if next.exclusive { break }
        }
    }
}
