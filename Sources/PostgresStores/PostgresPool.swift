import PostgresNIO
import ServiceLifecycle

/// A PostgreSQL store's connection pool, as a service of the worker's group. It runs from the
/// store's opening (the schema's migration needs it, before the group starts) until the group
/// stops it; placed before the services that use it, it is stopped after them, so the ledger
/// writer's last records and the registry's last command still find their connections. A store
/// opened outside a group (a command, a test) stops its pool when it is released.
///
/// A worker's pool holds its connections open (`holdsConnections`) and keeps them alive itself.
/// postgres-nio's own keep-alive and idle timeout start two timers each time a connection goes
/// back to the pool, and on Linux a cancelled `Task.sleep` keeps its memory until its deadline:
/// at a few thousand statements a second that was ~100 MiB of timers waiting out their 30 and
/// 60 s, and a tenth of the worker's CPU (`bench.sh schedule`, `bench.sh transactional`).
public final class PostgresPool: Service {
    let client: PostgresClient
    private let runner: Task<Void, Never>
    private let keepAlive: KeepAlive?
    private let logger: Logger

    /// Each held connection runs `SELECT 1` at least about every `interval`, so that a NAT or a
    /// load balancer that drops idle flows (AWS's after 350 s) never finds one idle.
    struct KeepAlive {
        var connections: Int
        var interval: Duration
    }

    public static let keepAliveInterval: Duration = .seconds(30)

    /// - Parameter holdsConnections: open `maximumConnections` at once and keep them (a
    ///   worker's pool); otherwise connections open as needed and close after a minute idle.
    init(configuration: PostgresClient.Configuration, holdsConnections: Bool = false, keepAliveInterval: Duration = PostgresPool.keepAliveInterval, logger: Logger) {
        var configuration = configuration
        if holdsConnections {
            configuration.options.minimumConnections = configuration.options.maximumConnections
            configuration.options.keepAliveBehavior = nil
            keepAlive = KeepAlive(connections: configuration.options.maximumConnections, interval: keepAliveInterval)
        } else {
            keepAlive = nil
        }
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.logger = logger
        runner = Task { await client.run() }
    }

    /// Holds the pool open until the group shuts down, then closes its connections, waiting
    /// for that at most `closing` (a connection attempt to a server gone away ignores the cancel
    /// until its own timeout, and the worker's grace is short).
    public func run() async {
        await withDiscardingTaskGroup { group in
            if let keepAlive {
                group.addTask { await self.keepConnectionsAlive(keepAlive) }
            }
            try? await gracefulShutdown()
            group.cancelAll()
            // A keep-alive query does not end on its task's cancellation; closing the pool ends it
            // (a server that stopped answering would otherwise hold the shutdown until TCP gives up).
            self.runner.cancel()
        }
        let runner = runner
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await runner.value }
            group.addTask { try? await Task.sleep(for: Self.closing) }
            await group.next()
            group.cancelAll()
        }
    }

    static let closing: Duration = .seconds(3)

    /// One round per interval: as many concurrent `SELECT 1` as the pool holds connections, so
    /// that the idle ones mostly each take one (one that answers fast may serve two, and a
    /// connection then waits a round: a minute against the minutes a NAT gives an idle flow). A
    /// round waits for its last query before the next sleeps, so a server that is away never
    /// piles rounds up.
    private func keepConnectionsAlive(_ keepAlive: KeepAlive) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: keepAlive.interval)
            } catch {
                return
            }
            await withDiscardingTaskGroup { group in
                for _ in 0..<keepAlive.connections {
                    group.addTask {
                        do {
                            try await self.client.withConnection { connection in
                                _ = try await connection.query("SELECT 1", logger: self.logger)
                            }
                        } catch where !Task.isCancelled {
                            self.logger.debug("a PostgreSQL keep-alive query failed", metadata: ["error": "\(String(reflecting: error))"])
                        } catch {}
                    }
                }
            }
        }
    }

    /// Stops the pool without waiting for it (a store that failed to open).
    func cancel() {
        runner.cancel()
    }

    deinit {
        runner.cancel()
    }
}
