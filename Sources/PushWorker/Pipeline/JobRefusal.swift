import AMQP
import Logging

/// Sees a refused job out: to the dead letters with the reason in its headers, and a summary with
/// the error to the producer's reply queue.
struct JobRefusal: Sendable {
    let publisher: any MessagePublishing
    let results: ResultPublisher
    let queues: WorkerSettings.Names
    let lane: Lane
    let metrics: WorkerMetrics
    let logger: Logger

    func refuse(_ delivery: JobDelivery, _ error: JobError) async -> JobSettlement {
        // The queue a replayed dead letter goes back to: the one it came from (an app's bulk
        // queue for a chunk, the due queue for a released job), else the jobs queue.
        let queue = delivery.queue ?? (lane == .bulk ? queues.bulkJobs : queues.jobs)
        // A body that was held names its job; a streamed one (over 1 MiB) was never held whole.
        let names = delivery.streamed == nil ? JobDecoder.names(in: delivery.body) : JobDecoder.Names()
        let jobID = names.id ?? delivery.properties.messageID ?? "unknown"
        logger.warning("job refused", metadata: ["job": "\(jobID)", "error": "\(error.code.rawValue)", "message": "\(error.message)"])
        guard delivery.streamed == nil else {
            // Its body was never held, so it cannot be republished with our headers: the broker
            // dead-letters the original (x-death reason "rejected"); the reason is in the log
            // line above and in the error summary.
            await sendErrorSummary(delivery, names: names, jobID: jobID, error)
            metrics.job(.refused, code: error.code.rawValue, lane: lane)
            metrics.deadLetter(queue: queue, code: error.code.rawValue)
            return .reject
        }
        do {
            try await DeadLetter.publish(
                delivery.body, refusing: delivery.properties, from: queue, code: error.code.rawValue, field: error.field, message: error.message,
                exchange: queues.deadLetterExchange, via: publisher)
        } catch {
            logger.error("cannot dead-letter the job; returning it to the queue", metadata: ["job": "\(jobID)", "error": "\(error)"])
            metrics.job(.requeued, lane: lane)
            return .requeue
        }
        metrics.job(.refused, code: error.code.rawValue, lane: lane)
        metrics.deadLetter(queue: queue, code: error.code.rawValue)
        await sendErrorSummary(delivery, names: names, jobID: jobID, error)
        return .acknowledge
    }

    /// To the job's own `reply_to` when its body names one (unless that is the fault), else to the
    /// AMQP `reply_to` property, as for results of a valid job.
    /// The summary names the body's `app` as written, also when that is the fault (`unknown_app`).
    private func sendErrorSummary(_ delivery: JobDelivery, names: JobDecoder.Names, jobID: String, _ error: JobError) async {
        let named = error.field == "reply_to" ? nil : names.replyTo
        guard let replyTo = named ?? delivery.properties.replyTo else { return }
        let summary = JobSummary(jobID: jobID, app: names.app, devices: 0, outcomes: [:], error: error, durationMilliseconds: 0)
        do { try await results.publish(summary, to: replyTo) } catch {
            logger.warning("cannot send the error summary", metadata: ["job": "\(jobID)", "reply_to": "\(replyTo)", "error": "\(error)"])
        }
    }
}
