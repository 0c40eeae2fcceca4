import AMQP
import APNs
import Foundation

extension JobProcessor {
    /// A broadcast job (`audience.channel`): one request to the channel, retried here on APNs'
    /// trouble (429, 5xx, a lost connection) up to the policy's attempts, then one result naming
    /// the channel and APNs' request id, then the summary. Never handed on as a retry job: a
    /// retry job carries devices, and a broadcast has none (APNs alone knows the subscribers).
    /// Nothing is filtered either: preferences belong to users, and a channel names none.
    func broadcast(_ job: PushJob, channel: String, replyTo: String, chunk: String?) async throws -> Report {
        let start = ContinuousClock.now
        let slots = await admission.admit(upTo: 1, lane: lane)
        defer { slots.releaseOne() }
        // Ours, so a job's result names the request even when APNs' answer never came.
        let requestID = UUID()
        let request = APNsRequest(
            deviceToken: "", topic: job.topic ?? topic, pushType: job.pushType, priority: job.priority, expiration: job.expiration,
            payload: job.payload, channelID: channel, requestID: requestID)
        var result = PushResult(jobID: job.id, token: "", app: appName, outcome: .failed, attempts: 0)
        result.channel = channel
        result.requestID = requestID.uuidString.lowercased()
        var reasonLabel: String?
        let policy = RetryPolicy(maxAttempts: retry.maxAttempts, inProcessAttempts: retry.maxAttempts, initialDelay: retry.initialDelay, maximumDelay: retry.maximumDelay)
        attempts: while true {
            if let expiration = job.expiration, expiration.hasPassed() {
                result.outcome = .expired
                break
            }
            result.attempts += 1
            let answer = await client.send([request])[0]
            reasonLabel = result.record(answer)
            switch DeviceStep.after(answer, attempts: result.attempts, previousAttempts: 0, policy: policy) {
            case .finish(let outcome, _):
                result.outcome = outcome
                break attempts
            case .retry, .handOn:
                logger.debug("retrying broadcast", metadata: ["job": "\(job.id)", "channel": "\(channel)", "attempt": "\(result.attempts)"])
                try await Task.sleep(for: retry.delay(afterAttempt: result.attempts))
            }
        }
        var unroutable = 0
        do {
            switch job.results {
            case .all:
                try await results.publish(result, to: replyTo)
            case .batched:
                // The shape a batched consumer reads: a `results` message, of one.
                let batch = ResultBatch(jobID: job.id, app: appName, chunk: chunk)
                if let message = batch.add(result) ?? batch.drain() { try await results.publish(message, jobID: job.id, to: replyTo) }
            case .failures where result.outcome.isFailure:
                try await results.publish(result, to: replyTo)
            case .failures, .none:
                break
            }
        } catch let error as AMQPError where error.kind == .returned {
            unroutable += 1
        }
        metrics.notification(app: appName, outcome: result.outcome, reason: reasonLabel)
        var summary = JobSummary(
            jobID: job.id, app: appName, devices: 1, outcomes: [result.outcome: 1], error: nil,
            durationMilliseconds: Int((ContinuousClock.now - start) / .milliseconds(1)))
        summary.chunk = chunk
        do {
            try await results.publish(summary, to: replyTo)
        } catch let error as AMQPError where error.kind == .returned {
            unroutable += 1
        }
        if unroutable > 0 {
            logger.warning("the reply queue vanished during the broadcast; its result was dropped, it is not sent again", metadata: [
                "job": "\(job.id)", "reply_to": "\(replyTo)",
            ])
        }
        logger.info("broadcast done", metadata: [
            "job": "\(job.id)", "app": "\(appName)", "channel": "\(channel)", "outcome": "\(result.outcome.rawValue)",
            "status": "\(result.status.map(String.init) ?? "-")", "reason": "\(result.reason ?? "-")", "request_id": "\(result.requestID ?? "-")",
        ])
        return Report(summary: summary, handedOn: [])
    }
}
