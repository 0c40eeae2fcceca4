import Foundation
import Testing

/// Test traits that share the one test broker safely across every test target in the process:
/// tests marked `.usesBroker` run side by side, a few at a time, and a test marked
/// `.restartsBroker` runs alone, because stopping the broker would break whatever else is talking
/// to it.
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
    /// The test talks to the broker and tolerates others doing so at the same time: at most
    /// ``BrokerLock/width`` of them at once.
    public static var usesBroker: Self { BrokerAccessTrait(exclusive: false) }
    /// The test stops or restarts the broker: nothing else may use it meanwhile.
    public static var restartsBroker: Self { BrokerAccessTrait(exclusive: true) }
}

/// A readers-writer lock for async code, with writers served in arrival order so a restarting
/// test is not starved by a steady stream of ordinary ones, and with a bounded number of readers.
///
/// The bound is for the machine, not the broker. Swift Testing starts every test at once, and
/// nearly every broker test starts worker processes (debug builds) and declares quorum queues.
/// About eighty of them starting together on two cores starve one another for minutes: their timed
/// waits fail at random, and the broker cannot elect new quorum queues' leaders in time
/// (`cluster_not_formed`). A few at a time keep both cores as busy.
actor BrokerLock {
    static let shared = BrokerLock(width: BrokerLock.configuredWidth)

    /// `PUSHWORKER_TEST_BROKER_WIDTH`, or 6: on two cores six worker tests keep both busy while
    /// some of them wait on timers.
    static var configuredWidth: Int {
        ProcessInfo.processInfo.environment["PUSHWORKER_TEST_BROKER_WIDTH"].flatMap { Int($0) }.map { max(1, $0) } ?? 6
    }

    /// Readers that may hold the lock at once.
    let width: Int

    private var readers = 0
    private var writer = false
    private var queue: [(exclusive: Bool, continuation: CheckedContinuation<Void, Never>)] = []

    init(width: Int) {
        self.width = width
    }

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
        if queue.isEmpty && admits(exclusive: exclusive) {
            if exclusive { writer = true } else { readers += 1 }
            return
        }
        await withCheckedContinuation { queue.append((exclusive, $0)) }
    }

    private func release(exclusive: Bool) {
        if exclusive { writer = false } else { readers -= 1 }
        while let next = queue.first, admits(exclusive: next.exclusive) {
            queue.removeFirst()
            if next.exclusive { writer = true } else { readers += 1 }
            next.continuation.resume()
            if next.exclusive { break }
        }
    }

    private func admits(exclusive: Bool) -> Bool {
        !writer && (exclusive ? readers == 0 : readers < width)
    }
}
