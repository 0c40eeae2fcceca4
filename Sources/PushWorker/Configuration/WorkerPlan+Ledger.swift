import Foundation
import Logging
import PostgresRegistry
import Registry

extension WorkerPlan {
    /// The ledger the configuration keeps, opened: `ledger.sqlite` when named, else the
    /// registry's store (its SQLite file, or its PostgreSQL partitioned by day); nil with
    /// `ledger: off`, or without a registry or a file for it (said in the log).
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

    /// - Parameter rebuildingIndexes: true for a worker, which gives a PostgreSQL ledger made by
    ///   an older version this version's indexes (minutes, with the table locked); a command that
    ///   only reads (`pushworker deliveries`, `schedule`) leaves that to the first worker.
    public func openLedger(registry: (any RegistryStore)?, rebuildingIndexes: Bool, logger: Logger) async throws -> (any DeliveryLedger)? {
        let settings = self.settings.ledger
        guard settings.enabled else { return nil }
        let path: String
        let key: String
        if let own = settings.sqlite {
            (path, key) = (PushWorkerConfiguration.path(own, besides: file), "ledger.sqlite")
        } else if let sqlite = self.settings.registry?.sqlite, registry != nil {
            (path, key) = (PushWorkerConfiguration.path(sqlite, besides: file), "registry.sqlite")
        } else if let postgres = registry as? PostgresRegistryStore {
            do { try await postgres.prepareLedger(rebuildingIndexes: rebuildingIndexes) } catch {
                throw ConfigurationError(file: file, key: "ledger", "cannot make the ledger's table in the PostgreSQL registry: \(error.message)")
            }
            return postgres
        } else {
            logger.notice("no delivery ledger: without a registry it needs a file of its own (ledger: {sqlite: FILE}); ledger: off says so")
            return nil
        }
        do {
            return try SQLiteDeliveryLedger(path: path)
        } catch {
            throw ConfigurationError(file: file, key: key, "cannot open the ledger there: \(error.message). Name another file with ledger.sqlite, or set ledger: off")
        }
    }

    /// The schedule, in the ledger's store: the PostgreSQL registry itself, or the ledger's SQLite
    /// file. nil without a ledger.
    public func openSchedule(ledger: (any DeliveryLedger)?) throws -> (any JobSchedule)? {
        if let schedule = ledger as? any JobSchedule { return schedule }
        guard let sqlite = ledger as? SQLiteDeliveryLedger else { return nil }
        do {
            return try SQLiteJobSchedule(ledger: sqlite)
        } catch {
            throw ConfigurationError(file: file, key: "ledger", "cannot open the schedule in the ledger's file \(sqlite.path): \(error.message)")
        }
    }

    /// The registry, the ledger and the schedule in it, opened as a worker opens them, for a
    /// program that works on the schedule alone (`pushworker schedule`, the benchmarks); nil
    /// without a ledger.
    public func openScheduler(logger: Logger) async throws -> JobScheduler? {
        let store = try await configuration.openRegistryStore(file: file, logger: logger)
        return try openSchedule(ledger: try await openLedger(registry: store, rebuildingIndexes: false, logger: logger))
            .map { JobScheduler(store: $0, horizonDays: settings.ledger.scheduleHorizonDays) }
    }
}
