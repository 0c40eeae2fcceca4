import PostgresNIO
import ServiceLifecycle

/// A PostgreSQL store's connection pool, as a service of the worker's group. It runs from the
/// store's opening (the schema's migration needs it, before the group starts) until the group
/// stops it; placed before the services that use it, it is stopped after them, so the ledger
/// writer's last records and the registry's last command still find their connections. A store
/// opened outside a group (a command, a test) stops its pool when it is released.
public final class PostgresPool: Service {
    let client: PostgresClient
    private let runner: Task<Void, Never>

    init(configuration: PostgresClient.Configuration, logger: Logger) {
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        runner = Task { await client.run() }
    }

    /// Holds the pool open until the group shuts down, then closes its connections, waiting
    /// for that at most `closing` (a connection attempt to a server gone away ignores the cancel
    /// until its own timeout, and the worker's grace is short).
    public func run() async {
        try? await gracefulShutdown()
        runner.cancel()
        let runner = runner
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await runner.value }
            group.addTask { try? await Task.sleep(for: Self.closing) }
            await group.next()
            group.cancelAll()
        }
    }

    static let closing: Duration = .seconds(3)

    /// Stops the pool without waiting for it (a store that failed to open).
    func cancel() {
        runner.cancel()
    }

    deinit {
        runner.cancel()
    }
}
