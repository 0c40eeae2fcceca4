import Logging
import Stores

/// Counts the job against its app's caps of its type, per user, and takes out the devices of
/// users over one (withheld, reason `frequency_cap`). Devices without a user are never capped.
struct FrequencyCapStage: JobStage {
    let schedule: any ScheduleStore
    let clock: WallClock
    /// Each app's caps.
    let caps: [String: [FrequencyCap]]
    let logger: Logger

    var onRecipients: Bool { true }

    func decide(_ staged: inout StagedJob) async throws -> StageVerdict {
        let job = staged.job
        guard var send = staged.recipients, !send.isEmpty, let caps = caps[job.app], caps.contains(where: { $0.applies(to: job.type) }) else { return .goOn }
        let now = clock.now()
        var capped: [Recipient] = []
        for cap in caps where cap.applies(to: job.type) {
            let users = Array(Set(send.compactMap(\.user)))
            guard !users.isEmpty else { break }
            let over = try await schedule.takeCap(cap.key, app: job.app, users: users, job: job.id, max: cap.max, since: now - Int64(cap.per) * 1000, now: now)
            guard !over.isEmpty else { continue }
            capped += send.filter { $0.user.map(over.contains) ?? false }
            send.removeAll { $0.user.map(over.contains) ?? false }
        }
        if !capped.isEmpty {
            logger.info("devices over a frequency cap not sent", metadata: ["job": "\(job.id)", "type": "\(job.type ?? "-")", "capped": "\(capped.count)"])
        }
        staged.recipients = send
        staged.withheld += capped.map { ($0, JobProcessor.frequencyCap) }
        return .goOn
    }
}
