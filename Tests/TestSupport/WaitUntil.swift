/// Polls `condition` every 20 ms until it holds, for a test that waits on something another
/// process or thread moves (requests reaching the mock, devices sent). It fails, naming `what`,
/// only once `limit` passes with no progress: `progress` is a count that rises as the awaited
/// work goes on (the mock's requests, devices sent), and each rise starts the limit again, so a
/// loaded machine that is slow but moving never fails the wait. Without one, the limit is the
/// time to the condition itself, which suits a wait for a first event.
public func waitUntil(
    _ what: String, stalledFor limit: Duration = .seconds(60), progress: () -> Int = { 0 }, _ condition: () -> Bool
) async throws {
    var seen = progress()
    var deadline = ContinuousClock.now + limit
    while !condition() {
        let now = progress()
        if now != seen {
            seen = now
            deadline = ContinuousClock.now + limit
        }
        guard ContinuousClock.now < deadline else { throw TestFailure("no progress in \(limit) (at \(seen)) waiting for: \(what)") }
        try await Task.sleep(for: .milliseconds(20))
    }
}
