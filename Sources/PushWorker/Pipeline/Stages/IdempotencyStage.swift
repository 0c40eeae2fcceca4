import Logging
import Stores

/// A job with an `idempotency_key` takes it in the ledger before anything is sent: a key taken
/// by an earlier job (within its window) ends the job with a summary naming that job, and a
/// redelivery of the job holding it goes on. A ledger that cannot answer sends the job back to
/// the queue rather than risk a second send.
struct IdempotencyStage: JobStage {
    let ledger: any PipelineLedger
    let logger: Logger

    var onRecipients: Bool { false }

    func decide(_ staged: inout StagedJob) async throws -> StageVerdict {
        // Chunk and retry jobs carry no key: their job took it.
        guard let key = staged.job.idempotencyKey, staged.isWhole else { return .goOn }
        let job = staged.job, delivery = staged.delivery
        let released = delivery.properties.headers?[WireHeader.released] != nil
        switch await ledger.claim(key: key, app: job.app, job: job.id, again: delivery.redelivered || released) {
        case .taken:
            return .goOn
        case .duplicate(let first):
            var summary = JobSummary(jobID: job.id, app: job.app, devices: 0, outcomes: [:], durationMilliseconds: 0)
            summary.duplicateOf = first
            return .settle(summary: summary, .acknowledge, outcome: .duplicate) { [logger] in
                logger.info("job not sent: its idempotency key was taken by an earlier job", metadata: ["job": "\(job.id)", "duplicate_of": "\(first)"])
            }
        case .unavailable(let problem):
            logger.error("cannot check the job's idempotency key; returning it to the queue", metadata: ["job": "\(job.id)", "error": "\(problem)"])
            return .settle(summary: nil, .requeue, outcome: .requeued)
        }
    }
}
