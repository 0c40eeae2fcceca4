import Foundation
import Logging
import Stores

/// A `local_time` job: its audience read page by page, each device placed at the instant its
/// zone's clock shows the time (the device's zone, else its user's, else the app's), and the
/// devices of one instant held together as parts of the job (chunk jobs, label "local", at most
/// `chunkSize` devices each) that the releasers send at that instant. At most one part per
/// distinct instant is in memory: a million-device group is never held whole.
struct LocalTimeStage: JobStage {
    let scheduler: JobScheduler
    let resolver: any AudienceResolver
    /// Where devices' and users' zones are kept; nil without a registry (every device then
    /// goes by its app's zone).
    let registry: (any RegistryStore)?
    /// Each app's zone, for devices and users with none of their own.
    let zones: [String: TimeZone]
    let chunkSize: Int
    let logger: Logger

    var onRecipients: Bool { false }

    func decide(_ staged: inout StagedJob) async throws -> StageVerdict {
        guard let localTime = staged.job.localTime, staged.isWhole else { return .goOn }
        let job = staged.job, store = scheduler.store, registry = registry
        let appZone = zones[job.app] ?? .gmt
        let now = scheduler.clock.now()
        var part = job
        part.localTime = nil
        part.audience.tokens = []
        let size = max(1, chunkSize)
        var pending: [Int64: AudiencePage] = [:]
        var parts = 0, devices = 0, earliest = Int64.max
        var instants: [String: Int64] = [:]
        func instant(inZone name: String?) -> Int64 {
            let key = name ?? ""
            if let known = instants[key] { return known }
            let found = localTime.instant(in: name.flatMap(TimeZone.init(identifier:)) ?? appZone, after: now)
            instants[key] = found
            return found
        }
        func hold(_ page: AudiencePage, at releaseAt: Int64) async throws {
            parts += 1
            try await store.hold(HeldJob(
                jobID: "\(job.id)~local~\(releaseAt)~\(parts)", app: job.app, releaseAt: releaseAt,
                body: String(decoding: try part.chunkBody(devices: page.recipients, filtered: page.filtered), as: UTF8.self),
                replyTo: staged.replyTo, heldAt: now, chunk: JobPipeline.localChunk))
            earliest = min(earliest, releaseAt)
        }
        try await resolver.resolve(job, explicit: staged.tokens.take(), pageSize: JobPipeline.pageSize) { audience in
            // Its parts can be cancelled as a split job's chunks are.
            try await store.started(JobRun(
                jobID: job.id, app: job.app, idempotencyKey: job.idempotencyKey, devices: audience.count, chunks: (audience.count + size - 1) / size, startedAt: now))
            try await audience.forEachPage { page in
                // Every device: one without a user may have a zone of its own.
                let timing = try await registry?.timing(
                    app: job.registryApp, tokens: (page.recipients + page.filtered).map(\.token),
                    preferencesApp: TokenNamespace.preferencesApp(job.registryApp)) ?? [:]
                for recipient in page.recipients {
                    let at = instant(inZone: timing[recipient.token]?.zone)
                    pending[at, default: AudiencePage()].recipients.append(recipient)
                    if pending[at]!.count >= size { try await hold(pending.removeValue(forKey: at)!, at: at) }
                }
                // Filtered devices get their result with the part sent first: no request is made for them.
                for recipient in page.filtered {
                    let at = instant(inZone: timing[recipient.token]?.zone)
                    pending[at, default: AudiencePage()].filtered.append(recipient)
                    if pending[at]!.count >= size { try await hold(pending.removeValue(forKey: at)!, at: at) }
                }
                devices += page.count
            }
        }
        for (at, page) in pending.sorted(by: { $0.key < $1.key }) { try await hold(page, at: at) }
        var summary = JobSummary(jobID: job.id, app: job.app, devices: devices, outcomes: [:], durationMilliseconds: 0)
        summary.deferred = devices
        if devices > 0 { summary.scheduledFor = JobScheduler.rfc3339(earliest) }
        let metadata: Logger.Metadata = [
            "job": "\(job.id)", "local_time": "\(localTime.text)", "devices": "\(devices)", "parts": "\(parts)", "zones": "\(instants.count)",
        ]
        return .settle(summary: summary, .acknowledge, outcome: .scheduled) { [logger] in
            logger.info("job held by its devices' zones until their local_time", metadata: metadata)
        }
    }
}
