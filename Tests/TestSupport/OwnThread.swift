import Foundation

/// Runs blocking work (a child process waited for, a node restarted) on a thread of its own and
/// awaits its end. A test that blocked instead would hold one of the few threads Swift's
/// cooperative pool runs every test on (two on a 2-core machine), and stall the others' work,
/// an in-process mock's answers among it.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
