import Foundation
import Logging
import Stores

/// Takes out the devices whose users are in their quiet hours: those the job drops (withheld,
/// reason `quiet_hours`), and those it defers, each group held in the schedule as a part of the
/// job (a chunk job of its devices, label "deferred", quiet hours ignored) released at its
/// window's end. Without a schedule to hold them, deferred devices are dropped.
struct QuietHoursStage: JobStage {
    let gate: QuietHoursGate
    /// Where deferred devices are held; nil without a ledger.
    let schedule: (any ScheduleStore)?
    let clock: WallClock
    /// Each app's mode for jobs that name none, and its zone for users with none of their own.
    let apps: [String: (mode: PushJob.QuietHoursMode, zone: TimeZone)]
    let logger: Logger

    var onRecipients: Bool { true }

    func decide(_ staged: inout StagedJob) async throws -> StageVerdict {
        let job = staged.job
        guard let recipients = staged.recipients, !recipients.isEmpty, let app = apps[job.app] else { return .goOn }
        let mode = job.quietHours ?? app.mode
        guard mode != .ignore else { return .goOn }
        let now = clock.now()
        let split = try await gate.split(recipients, of: job, mode: mode, zone: app.zone, now: now)
        staged.recipients = split.send
        staged.withheld += split.dropped.map { ($0, JobProcessor.quietHours) }
        guard !split.deferred.isEmpty else { return .goOn }
        guard let schedule else {
            logger.warning("devices in their quiet hours dropped, not deferred: deferring needs the schedule (ledger: off)", metadata: ["job": "\(job.id)"])
            staged.withheld += split.deferred.values.flatMap { $0 }.map { ($0, JobProcessor.quietHours) }
            return .goOn
        }
        var part = job
        part.quietHours = .ignore
        part.sendAt = nil
        let chunk = staged.delivery.chunk
        var deferred = 0
        for (end, devices) in split.deferred.sorted(by: { $0.key < $1.key }) {
            let body = try part.chunkBody(devices: devices)
            try await schedule.hold(HeldJob(
                jobID: "\(job.id)~quiet~\(chunk ?? "whole")~\(end)", app: job.app, releaseAt: end, body: String(decoding: body, as: UTF8.self),
                replyTo: staged.replyTo, heldAt: now, chunk: JobPipeline.deferredChunk))
            deferred += devices.count
        }
        staged.deferred += deferred
        logger.info("devices in their quiet hours held until the window ends", metadata: [
            "job": "\(job.id)", "chunk": "\(chunk ?? "-")", "deferred": "\(deferred)", "parts": "\(split.deferred.count)",
        ])
        return .goOn
    }
}
