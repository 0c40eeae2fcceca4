import Foundation

/// A worker without a ledger keeps no idempotency keys, and one without a schedule (kept in the
/// ledger's store) holds no job: a job that needs either is refused, naming the field, rather
/// than sent twice or early. A `send_at` already due, a chunk and a release are sent.
struct StoreRequiredStage: JobStage {
    let withoutLedger: Bool
    let withoutSchedule: Bool

    var onRecipients: Bool { false }

    private static let none = "this worker keeps none (ledger: off, or no registry and no ledger.sqlite)"

    func decide(_ staged: inout StagedJob) async throws -> StageVerdict {
        let job = staged.job, delivery = staged.delivery
        if withoutLedger, job.idempotencyKey != nil, staged.isWhole {
            return .refuse(JobError(.invalidField, field: "idempotency_key", "idempotency_key needs the delivery ledger, and \(Self.none)"))
        }
        guard withoutSchedule, staged.isWhole else { return .goOn }
        if let sendAt = job.sendAt, sendAt.timeIntervalSinceNow > 0, delivery.properties.headers?[WireHeader.released] == nil {
            return .refuse(JobError(.invalidField, field: "send_at", "send_at needs the schedule, kept in the delivery ledger's store, and \(Self.none)"))
        }
        if job.localTime != nil {
            return .refuse(JobError(.invalidField, field: "local_time", "local_time needs the schedule, kept in the delivery ledger's store, and \(Self.none)"))
        }
        return .goOn
    }
}
