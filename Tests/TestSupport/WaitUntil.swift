/// Polls `condition` every 20 ms until it holds, for a test that waits on a count or a state
/// another process or thread moves (requests reaching the mock, devices sent). It fails, naming
/// `what`, once `limit` passes with the condition still false: on a loaded machine a wait
/// that is long but moving is fine, so the limit is generous rather than a measure of speed.
public func waitUntil(_ what: String, within limit: Duration = .seconds(60), _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < deadline else { throw TestFailure("waited \(limit) for: \(what)") }
        try await Task.sleep(for: .milliseconds(20))
    }
}
