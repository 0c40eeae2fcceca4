import APNs
import Foundation

extension JobProcessor {
    /// A broadcast job (`audience.channel`): one request to the channel, retried here on APNs'
    /// trouble (429, 5xx, a lost connection) up to the policy's attempts, then one result naming
    /// the channel and APNs' request id, then the summary. Never handed on as a retry job: a
    /// retry job carries devices, and a broadcast has none (APNs alone knows the subscribers).
    /// Nothing is filtered either: preferences belong to users, and a channel names none.
    func broadcast(_ job: PushJob, channel: String, replyTo: String, chunk: String?, consultLedger: Bool = false) async throws -> Report {
        let start = ContinuousClock.now
        if consultLedger, let ledger, let held = await ledger.finals(job: job.id, app: appName, tokens: [""])[""] {
            // Came back after a fault, its one result in the ledger: nothing to send again, and
            // the result published again only if no reply for it was confirmed (`batched`).
            let ends = DeviceEnds(batch: job.results == .batched ? ResultBatch(jobID: job.id, app: appName, chunk: chunk) : nil, chunk: chunk)
            ends.record([Outcome(rawValue: held.outcome) ?? .failed: 1])
            try await answerFromLedger([held], of: job, to: replyTo, ends: ends)
            logger.notice("broadcast came back: its result is in the ledger, not sent again", metadata: ["job": "\(job.id)", "channel": "\(channel)"])
            return Report(summary: try await summarize(job, devices: 1, ends: ends, start: start, replyTo: replyTo, chunk: chunk, error: nil), handedOn: [])
        }
        let slots = await admission.admit(upTo: 1, lane: lane)
        defer { slots.releaseOne() }
        let ends = DeviceEnds(batch: job.results == .batched ? ResultBatch(jobID: job.id, app: appName, chunk: chunk) : nil, chunk: chunk)
        // Ours, so a job's result names the request even when APNs' answer never came.
        let requestID = UUID()
        let request = APNsRequest(
            deviceToken: "", topic: job.topic ?? topic, pushType: job.pushType, priority: job.priority, expiration: job.expiration,
            payload: job.payload, channelID: channel, requestID: requestID)
        var result = PushResult(jobID: job.id, token: "", app: appName, outcome: .failed, attempts: 0)
        result.channel = channel
        result.requestID = requestID.uuidString.lowercased()
        // Every attempt in process: nothing to hand on.
        let policy = RetryPolicy(maxAttempts: retry.maxAttempts, inProcessAttempts: retry.maxAttempts, initialDelay: retry.initialDelay, maximumDelay: retry.maximumDelay)
        let (_, _, reasonLabel) = try await attempt(request, of: job, result: &result, firstAnswer: nil, previousAttempts: 0, policy: policy, subject: ["channel": "\(channel)"])
        try await report(result, of: job, to: replyTo, ends: ends)
        ends.record(.final(result.outcome))
        metrics.notification(app: appName, outcome: result.outcome, reason: reasonLabel)
        let summary = try await summarize(job, devices: 1, ends: ends, start: start, replyTo: replyTo, chunk: chunk, error: nil)
        logger.info("broadcast done", metadata: [
            "job": "\(job.id)", "app": "\(appName)", "channel": "\(channel)", "outcome": "\(result.outcome.rawValue)",
            "status": "\(result.status.map(String.init) ?? "-")", "reason": "\(result.reason ?? "-")", "request_id": "\(result.requestID ?? "-")",
        ])
        return Report(summary: summary, handedOn: [])
    }
}
