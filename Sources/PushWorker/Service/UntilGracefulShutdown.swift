import ServiceLifecycle

/// Runs `work` (a service's connecting, which waits for a broker that cannot be reached yet and
/// cannot be interrupted) until it finishes or a graceful shutdown comes first. On shutdown it
/// returns nil at once, and whatever `work` opens later is handed to `abandoned` to close: a
/// worker told to stop while it waits for its broker stops then, not at the end of the grace.
func untilGracefulShutdown<Value: Sendable>(
    _ work: @escaping @Sendable () async throws -> Value, abandoned: @escaping @Sendable (Value) async -> Void
) async throws -> Value? {
    let (outcomes, sink) = AsyncStream<Result<Value, any Error>?>.makeStream()
    let working = Task {
        let result: Result<Value, any Error>
        do { result = .success(try await work()) } catch { result = .failure(error) }
        sink.yield(result)
        return result
    }
    let first = await withGracefulShutdownHandler {
        var iterator = outcomes.makeAsyncIterator()
        return await iterator.next() ?? nil
    } onGracefulShutdown: {
        sink.yield(nil)
    }
    guard let first else {
        working.cancel()  // for whatever in `work` heeds it; the rest is closed once it returns
        Task {
            if case .success(let value) = await working.value { await abandoned(value) }
        }
        return nil
    }
    return try first.get()
}
