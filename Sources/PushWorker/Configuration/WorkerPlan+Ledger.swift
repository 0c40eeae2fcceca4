import Foundation
import Logging
import PostgresStores
import SQLiteStores
import Stores
import ServiceLifecycle

extension WorkerPlan {
    /// The ledger's ranges, checked with the rest of the plan (so `config check` sees them too).
    static func checkLedger(_ settings: WorkerSettings.Ledger, file: String) throws(ConfigurationError) {
        guard settings.enabled else { return }
        guard (1...3650).contains(settings.retentionDays) else {
            throw ConfigurationError(file: file, key: "ledger.retention_days", "\(settings.retentionDays) is not between 1 and 3650")
        }
        guard (1...settings.retentionDays * 24).contains(settings.idempotencyHours) else {
            throw ConfigurationError(
                file: file, key: "ledger.idempotency_hours",
                "\(settings.idempotencyHours) is not between 1 and the retention (\(settings.retentionDays * 24) hours): a key is remembered only as long as the ledger")
        }
        guard (1...3650).contains(settings.scheduleHorizonDays) else {
            throw ConfigurationError(file: file, key: "ledger.schedule_horizon_days", "\(settings.scheduleHorizonDays) is not between 1 and 3650")
        }
    }

    /// The registry, the ledger and the schedule the configuration keeps, opened. Each backend
    /// opens what it holds: an SQLite registry's file holds the ledger and the schedule too
    /// (unless `ledger.sqlite` names a file of their own); a PostgreSQL registry holds them in
    /// its database, partitioned by day; without a registry, `ledger.sqlite` holds them, and
    /// without that there is no ledger (said in the log). No ledger with `ledger: off`.
    /// - Parameter rebuildingIndexes: true for a worker, which gives a PostgreSQL ledger made by
    ///   an older version this version's indexes (minutes, with the table locked); a command that
    ///   only reads (`pushworker deliveries`, `schedule`) leaves that to the first worker.
    public func openStores(rebuildingIndexes: Bool, environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger) async throws -> OpenedStores {
        try await openStores(
            in: configuration.openRegistry(file: file, environment: environment, logger: logger), rebuildingIndexes: rebuildingIndexes, logger: logger)
    }

    /// The ledger and the schedule, given the registry opened already (`openRegistry`).
    func openStores(in registry: PushWorkerConfiguration.OpenedRegistry?, rebuildingIndexes: Bool, logger: Logger) async throws -> OpenedStores {
        var opened = try await openLedger(in: registry, rebuildingIndexes: rebuildingIndexes, logger: logger)
        if case .postgres(let postgres) = registry { opened.services = [postgres.pool] }
        return opened
    }

    private func openLedger(in registry: PushWorkerConfiguration.OpenedRegistry?, rebuildingIndexes: Bool, logger: Logger) async throws -> OpenedStores {
        let settings = self.settings.ledger
        guard settings.enabled else { return OpenedStores(registry: registry?.store) }
        if let own = settings.sqlite {
            return try openLedgerFile(PushWorkerConfiguration.path(own, besides: file), key: "ledger.sqlite", registry: registry?.store)
        }
        switch registry {
        case .sqlite(let store, let path):
            return try openLedgerFile(path, key: "registry.sqlite", registry: store)
        case .postgres(let postgres):
            do { try await postgres.ledger.prepareLedger(rebuildingIndexes: rebuildingIndexes) } catch {
                throw ConfigurationError(file: file, key: "ledger", "cannot make the ledger's table in the PostgreSQL registry: \(error.message)")
            }
            return OpenedStores(registry: postgres, ledger: postgres.ledger, schedule: postgres.schedule)
        case nil:
            logger.notice("no delivery ledger: without a registry it needs a file of its own (ledger: {sqlite: FILE}); ledger: off says so")
            return OpenedStores()
        }
    }

    /// The ledger and the schedule in one SQLite file.
    private func openLedgerFile(_ path: String, key: String, registry: (any RegistryStore)?) throws(ConfigurationError) -> OpenedStores {
        let ledger: SQLiteLedgerStore
        do {
            ledger = try SQLiteLedgerStore(path: path)
        } catch {
            throw ConfigurationError(file: file, key: key, "cannot open the ledger there: \(error.message). Name another file with ledger.sqlite, or set ledger: off")
        }
        do {
            return OpenedStores(registry: registry, ledger: ledger, schedule: try SQLiteScheduleStore(ledger: ledger))
        } catch {
            throw ConfigurationError(file: file, key: "ledger", "cannot open the schedule in the ledger's file \(path): \(error.message)")
        }
    }

    /// The schedule, opened as a worker opens it, for a program that works on the schedule alone
    /// (`pushworker schedule`, the benchmarks); nil without a ledger.
    public func openScheduler(logger: Logger) async throws -> JobScheduler? {
        try await openStores(rebuildingIndexes: false, logger: logger).schedule
            .map { JobScheduler(store: $0, horizonDays: settings.ledger.scheduleHorizonDays) }
    }
}

/// What a configuration's stores hold, each opened by the backend that holds it: the registry of
/// devices, users and groups; the delivery ledger; and the schedule, kept in the ledger's store.
public struct OpenedStores: Sendable {
    public var registry: (any RegistryStore)?
    public var ledger: (any LedgerStore)?
    public var schedule: (any ScheduleStore)?
    /// What the stores run while they are open (a PostgreSQL store's connection pool), for the
    /// worker's service group, ahead of the services that use them.
    public var services: [any Service] = []

    public init(registry: (any RegistryStore)? = nil, ledger: (any LedgerStore)? = nil, schedule: (any ScheduleStore)? = nil) {
        self.registry = registry
        self.ledger = ledger
        self.schedule = schedule
    }
}
