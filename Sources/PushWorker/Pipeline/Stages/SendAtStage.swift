import Logging
import Stores

/// A job whose `send_at` is ahead is held in the schedule and answered with a summary saying
/// when; the releasers send it then. A due one goes on.
struct SendAtStage: JobStage {
    let scheduler: JobScheduler
    let logger: Logger

    var onRecipients: Bool { false }

    func decide(_ staged: inout StagedJob) async throws -> StageVerdict {
        let job = staged.job, delivery = staged.delivery
        let now = scheduler.clock.now()
        guard job.sendAt != nil, scheduler.holds(job, delivery, now: now) else { return .goOn }
        let held: HeldJob
        do {
            held = try await scheduler.hold(job, delivery, replyTo: delivery.properties.replyTo, now: now)
        } catch let error as JobError {
            return .refuse(error)
        } catch {
            logger.error("cannot hold the scheduled job; returning it to the queue", metadata: ["job": "\(job.id)", "error": "\(error)"])
            return .settle(summary: nil, .requeue, outcome: .requeued)
        }
        var summary = JobSummary(jobID: job.id, app: job.app, devices: 0, outcomes: [:], durationMilliseconds: 0)
        summary.scheduledFor = JobScheduler.rfc3339(held.releaseAt)
        return .settle(summary: summary, .acknowledge, outcome: .scheduled) { [logger, scheduledFor = summary.scheduledFor] in
            logger.info("job held until its send_at", metadata: ["job": "\(job.id)", "app": "\(job.app)", "send_at": "\(scheduledFor ?? "")"])
        }
    }
}
