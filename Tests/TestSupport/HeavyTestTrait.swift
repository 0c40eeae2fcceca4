import Testing

/// Marks a test that loads the machine for a while (thousands of notifications through debug
/// builds of the worker and the mock, worker processes killed and restarted). Such tests run one
/// at a time, while light tests go on beside them: on a two-core machine two of them at once
/// starve each other and both crawl.
///
/// Put it before `.usesBroker`/`.restartsBroker` where both apply, so a test waits for its turn
/// here without holding a share of the broker that a restarting test waits for.
public struct HeavyTestTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard !test.isSuite else { return try await function() }
        await HeavyTestTurns.shared.acquire()
        do {
            try await function()
        } catch {
            await HeavyTestTurns.shared.release()
            throw error
        }
        await HeavyTestTurns.shared.release()
    }
}

extension Trait where Self == HeavyTestTrait {
    /// The test is heavy: it runs when no other heavy test does.
    public static var heavy: Self { HeavyTestTrait() }
}

/// One turn at a time, served in arrival order.
actor HeavyTestTurns {
    static let shared = HeavyTestTurns()

    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty {
            busy = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}
