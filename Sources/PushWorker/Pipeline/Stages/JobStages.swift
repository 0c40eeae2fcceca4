import Foundation
import Logging
import Stores

/// The stages a worker's jobs pass through, in order.
public enum JobStages {
    /// What a worker with this ledger, schedule and registry decides before a send: first on the
    /// job (its idempotency key, then a `send_at` ahead, then a `local_time`), then, its audience
    /// read, on its recipients (quiet hours, then frequency caps). Without a ledger the job's
    /// stages are one that refuses what needs it (and without a schedule, what needs that); without
    /// a registry there are no quiet hours, and without a schedule no caps.
    public static func assemble(
        apps: [JobPipeline.App], ledger: (any PipelineLedger)?, scheduler: JobScheduler?, registry: (any RegistryStore)?,
        resolver: any AudienceResolver, chunkSize: Int, clock: WallClock = .system, logger: Logger
    ) -> [any JobStage] {
        var stages: [any JobStage] = []
        if let ledger { stages.append(IdempotencyStage(ledger: ledger, logger: logger)) }
        if ledger == nil || scheduler == nil {
            stages.append(StoreRequiredStage(withoutLedger: ledger == nil, withoutSchedule: scheduler == nil))
        }
        if let scheduler {
            stages.append(SendAtStage(scheduler: scheduler, logger: logger))
            stages.append(LocalTimeStage(
                scheduler: scheduler, resolver: resolver, registry: registry,
                zones: Dictionary(apps.map { ($0.name, $0.timeZone) }, uniquingKeysWith: { first, _ in first }), chunkSize: chunkSize, logger: logger))
        }
        if let registry {
            stages.append(QuietHoursStage(
                gate: QuietHoursGate(store: registry), schedule: scheduler?.store, clock: scheduler?.clock ?? clock,
                apps: Dictionary(apps.map { ($0.name, ($0.quietHours, $0.timeZone)) }, uniquingKeysWith: { first, _ in first }), logger: logger))
        }
        if let scheduler, apps.contains(where: { !$0.caps.isEmpty }) {
            stages.append(FrequencyCapStage(
                schedule: scheduler.store, clock: scheduler.clock,
                caps: Dictionary(apps.map { ($0.name, $0.caps) }, uniquingKeysWith: { first, _ in first }), logger: logger))
        }
        return stages
    }
}
