import DeviceTokens
import APNs
import AMQP
import Foundation
import Logging
import Stores

/// What happens to one job, from its body to how its delivery is settled:
/// decode → check the reply queue → the job's stages → resolve, or split (large), or broadcast →
/// the recipients' stages → send → hand on → acknowledge. The decisions before a send are stages
/// (`JobStage`), assembled by `JobStages`.
///
/// It holds no connection: it sends through `NotificationSending` and publishes through
/// `MessagePublishing`, so every branch (a job read whole or streamed, a chunk, a retry, a refusal)
/// runs in a test with stand-ins, and the `Worker` around it only consumes and settles.
public final class JobPipeline: Sendable {
    /// A configured app: its name, default topic, the client that sends for it and its bound on
    /// devices in flight.
    public struct App: Sendable {
        public var name: String
        public var topic: String
        public var sender: any NotificationSending
        public var admission: DeviceAdmission
        /// For jobs that name no `expiration`.
        public var defaultExpiration: DefaultExpiration?
        /// For jobs that name no `results`.
        public var defaultResults: PushJob.ResultsMode?
        /// The zone of users and devices with none of their own.
        public var timeZone: TimeZone
        /// For jobs that name no `quiet_hours`.
        public var quietHours: PushJob.QuietHoursMode
        /// Frequency caps per user and type.
        public var caps: [FrequencyCap]
        /// Its FCM side, for Android devices; nil for an app on APNs only.
        public var fcm: (any FCMSending)?

        public init(
            name: String, topic: String, sender: any NotificationSending,
            admission: DeviceAdmission = DeviceAdmission(maxInFlight: AppConfiguration.defaultMaxInFlight),
            defaultExpiration: DefaultExpiration? = nil, defaultResults: PushJob.ResultsMode? = nil, timeZone: TimeZone = .gmt,
            quietHours: PushJob.QuietHoursMode = .defer, caps: [FrequencyCap] = [], fcm: (any FCMSending)? = nil
        ) {
            self.fcm = fcm
            self.caps = caps
            self.timeZone = timeZone
            self.quietHours = quietHours
            self.name = name
            self.topic = topic
            self.sender = sender
            self.admission = admission
            self.defaultExpiration = defaultExpiration
            self.defaultResults = defaultResults
        }
    }

    private let settings: WorkerSettings
    private let lane: Lane
    private let publisher: any MessagePublishing
    private let decoder: JobDecoder
    private let processors: [String: JobProcessor]
    private let results: ResultPublisher
    private let replyQueues: ReplyQueues
    private let resolver: any AudienceResolver
    private let splitter: JobSplitter
    private let retries: RetryHandOff
    private let refusal: JobRefusal
    private let scheduler: JobScheduler?
    /// The job's stages, then its recipients', each in the assembly's order.
    private let jobStages: [any JobStage]
    private let recipientStages: [any JobStage]
    private let metrics: WorkerMetrics
    private let logger: Logger
    /// The now lane's bound on large bodies in work; nil on the bulk lane, whose prefetch bounds it.
    private let bodyBudget: JobBodyBudget?

    /// - Parameters:
    ///   - lane: the queue the deliveries come from; the now lane hands chunks of split jobs on to
    ///     the bulk lane, and its devices go ahead of the bulk lane's for APNs.
    ///   - stages: the decisions before a send, in order; nil for those of this ledger and
    ///     schedule without a registry (`JobStages.assemble`).
    ///   - bodyBudget: shared by the lane's pipelines; large bodies wait for room in it before
    ///     they are decoded.
    public init(
        settings: WorkerSettings, lane: Lane = .now, apps: [App], publisher: any MessagePublishing,
        resolver: any AudienceResolver = ExplicitTokenResolver(), feedback: (any DeviceFeedback)? = nil,
        badges: (any BadgeCounter)? = nil, ledger: (any PipelineLedger)? = nil, scheduler: JobScheduler? = nil,
        stages: [any JobStage]? = nil, bodyBudget: JobBodyBudget? = nil, metrics: WorkerMetrics = WorkerMetrics(), logger: Logger
    ) {
        self.bodyBudget = bodyBudget
        self.scheduler = scheduler
        let stages = stages ?? JobStages.assemble(
            apps: apps, ledger: ledger, scheduler: scheduler, registry: nil, resolver: resolver, chunkSize: settings.chunkSize, logger: logger)
        jobStages = stages.filter { !$0.onRecipients }
        recipientStages = stages.filter(\.onRecipients)
        let results = ResultPublisher(publisher: publisher)
        self.settings = settings
        self.lane = lane
        self.publisher = publisher
        self.decoder = JobDecoder(
            apps: Dictionary(apps.map { ($0.name, $0.topic) }, uniquingKeysWith: { first, _ in first }),
            defaultExpirations: Dictionary(apps.compactMap { app in app.defaultExpiration.map { (app.name, $0) } }, uniquingKeysWith: { first, _ in first }),
            defaultResults: Dictionary(apps.compactMap { app in app.defaultResults.map { (app.name, $0) } }, uniquingKeysWith: { first, _ in first }))
        self.processors = Dictionary(
            apps.map { app in
                (app.name, {
                    var processor = JobProcessor(
                        client: app.sender, admission: app.admission, topic: app.topic, appName: app.name, results: results, retry: settings.retryPolicy,
                        lane: lane, feedback: feedback, badges: badges, ledger: ledger, metrics: metrics, logger: logger)
                    processor.fcm = app.fcm
                    return processor
                }())
            },
            uniquingKeysWith: { first, _ in first })
        self.results = results
        self.replyQueues = ReplyQueues(publisher: publisher)
        self.resolver = resolver
        self.splitter = JobSplitter(publisher: publisher, queues: settings.queues, chunkSize: settings.chunkSize, logger: logger)
        self.retries = RetryHandOff(
            publisher: publisher, queues: settings.queues, delaysMilliseconds: settings.retryDelaysMilliseconds, metrics: metrics, logger: logger)
        self.refusal = JobRefusal(publisher: publisher, results: results, queues: settings.queues, lane: lane, metrics: metrics, logger: logger)
        self.metrics = metrics
        self.logger = logger
    }

    /// Sees one job through. Never throws: every failure ends in a settlement, and a job is
    /// acknowledged only once its results, chunks, hand-ons or dead letter are confirmed.
    public func run(_ delivery: JobDelivery) async -> JobSettlement {
        let start = ContinuousClock.now
        // Held until the pipeline's settlement: a large body's decoded tokens, its recipients or
        // its chunks live that long.
        var weight = 0
        if let bodyBudget {
            guard let admitted = await bodyBudget.admit(delivery) else {
                metrics.job(.requeued, lane: lane)
                return .requeue
            }
            weight = admitted
        }
        defer { bodyBudget?.release(weight) }
        var app = ""
        let settlement = await process(delivery, app: &app)
        metrics.jobTook(ContinuousClock.now - start, lane: lane, app: app)
        return settlement
    }

    /// `app`: set to the job's app once it is read.
    private func process(_ delivery: JobDelivery, app: inout String) async -> JobSettlement {
        var job: PushJob
        var streamed: DeviceTokenList?
        do {
            (job, streamed) = try decode(delivery)
        } catch {
            return await refusal.refuse(delivery, error)
        }
        app = job.app
        if let enqueued = delivery.properties.headers?[WireHeader.enqueuedAt]?.intValue {
            metrics.jobWaited(.milliseconds(max(0, WireHeader.nowMilliseconds() - enqueued)), lane: lane, app: job.app)
        }
        if lane == .now, let chunk = delivery.chunk, chunk != RetryHandOff.wholeJobChunk, delivery.streamed == nil {
            // A split job's chunk on the now lane: back from a retry round (the retry queues
            // return to the jobs queue), replayed there, or split by a worker without lanes.
            return await handToBulkLane(delivery, app: job.app, chunk: chunk)
        }
        let replyTo = job.replyTo ?? delivery.properties.replyTo ?? settings.queues.results
        do {
            // Before anything is sent: results to a missing queue would be returned, the job
            // requeued, and every device sent again.
            guard try await replyQueues.exists(replyTo) else {
                return await refusal.refuse(delivery, JobError(.invalidField, field: "reply_to",
                    "reply_to names queue '\(replyTo)', which does not exist; declare it before publishing the job"))
            }
            guard let processor = processors[job.app] else {
                // The decoder only accepts configured apps; this keeps a job from hanging if that ever changes.
                return await refusal.refuse(delivery, JobError(.unknownApp, field: "app", "app '\(job.app)' is not configured"))
            }
            if !job.audience.fcmTokens.isEmpty {
                guard processor.fcm != nil else {
                    return await refusal.refuse(delivery, JobError(.invalidField, field: "audience.fcm_tokens",
                        "app '\(job.app)' has no fcm side (apps[].fcm, its Firebase service account): its Android devices cannot be reached"))
                }
                // A streamed body's tokens are in `streamed`, its skeleton's list empty.
                let apnsTokens = job.audience.tokens.count + (streamed?.count ?? 0)
                guard !job.androidOnlyPayload || apnsTokens == 0 else {
                    return await refusal.refuse(delivery, JobError(.missingField, field: "payload", "payload is missing: audience.tokens reach APNs devices"))
                }
            }
            // Read before the job's tokens are handed to the stages: a retry job of an older
            // worker names tokens, and its header's counts go by them.
            let attempts = RetryHandOff.previousAttempts(of: job, delivery)
            let badges = job.badge == nil ? [:] : RetryHandOff.badges(of: job, delivery)
            var staged = StagedJob(job: job, delivery: delivery, replyTo: replyTo, tokens: streamed.take())
            job = staged.job  // its tokens held once, in `staged.tokens`
            for stage in jobStages {
                if let settlement = try await settle(stage, &staged) { return settlement }
            }
            job = staged.job
            if let channel = job.audience.channel {
                _ = try await processor.broadcast(job, channel: channel, replyTo: replyTo, chunk: delivery.chunk, consultLedger: delivery.mayRepeat)
                metrics.job(.done, lane: lane)
                return .acknowledge
            }
            let audience: AudiencePage
            var unresolved: JobError?
            if job.audience.isResolved {
                // A chunk or retry job: its devices were resolved by the worker that split it.
                audience = AudiencePage(recipients: job.audience.devices, filtered: job.audience.filtered)
            } else {
                guard let whole = try await resolve(job, explicit: staged.tokens.take(), from: delivery, replyTo: replyTo, unresolved: &unresolved) else {
                    metrics.job(.split, lane: lane)
                    return .acknowledge  // split into chunk jobs, all confirmed
                }
                audience = whole
            }
            var recipients = audience.recipients
            if !attempts.isEmpty {
                for index in recipients.indices { recipients[index].previousAttempts = attempts[recipients[index].token] ?? 0 }
            }
            if !badges.isEmpty {
                for index in recipients.indices { recipients[index].badge = badges[recipients[index].token] }
            }
            staged.recipients = recipients
            for stage in recipientStages {
                if let settlement = try await settle(stage, &staged) { return settlement }
            }
            // A chunk (or its retry) of a job split into chunk jobs: a cancel stops it.
            let cancelled: (@Sendable () async -> Bool)? = if delivery.chunk != nil, let watch = scheduler?.cancellations {
                { [id = job.id, app = job.app] in await watch.isCancelled(job: id, app: app) }
            } else { nil }
            let report = try await processor.process(
                job, devices: JobDevices(send: staged.recipients ?? [], filtered: audience.filtered, withheld: staged.withheld, deferred: staged.deferred),
                part: JobPart(chunk: delivery.chunk, mayRepeat: delivery.mayRepeat, isCurrent: delivery.isCurrent, cancelled: cancelled),
                replyTo: replyTo, error: unresolved)
            if !report.handedOn.isEmpty {
                try await retries.handOn(job, report.handedOn, from: delivery)
            }
            metrics.job(.done, code: unresolved?.code.rawValue, lane: lane)
            return .acknowledge
        } catch is JobProcessor.DeliveryLost {
            logger.notice("the job's connection went: stopped sending it; the broker delivers it again", metadata: ["job": "\(job.id)", "chunk": "\(delivery.chunk ?? "-")"])
            metrics.job(.requeued, lane: lane)
            return .requeue
        } catch {
            logger.error("job failed; returning it to the queue", metadata: ["job": "\(job.id)", "error": "\(error)"])
            metrics.job(.requeued, lane: lane)
            return .requeue
        }
    }

    /// Runs a stage; the settlement when the job ends there.
    private func settle(_ stage: any JobStage, _ staged: inout StagedJob) async throws -> JobSettlement? {
        switch try await stage.decide(&staged) {
        case .goOn:
            return nil
        case .refuse(let error):
            return await refusal.refuse(staged.delivery, error)
        case .settle(let summary, let settlement, let outcome, let published):
            if let summary { try await results.publish(summary, to: staged.replyTo) }
            published?()
            metrics.job(outcome, lane: lane)
            return settlement
        }
    }

    /// The chunk label of a part of a `local_time` job.
    public static let localChunk = "local"

    /// The chunk label of a part of a job held until its devices' quiet hours end.
    public static let deferredChunk = "deferred"

    /// The job, and for a streamed body its tokens as bytes (the job itself then holds none).
    private func decode(_ delivery: JobDelivery) throws(JobError) -> (PushJob, DeviceTokenList?) {
        let enqueuedAt = delivery.properties.timestamp.map { Date(timeIntervalSince1970: Double($0)) } ?? Date()
        let chunk = delivery.chunk != nil
        guard let reader = delivery.streamed else {
            return (try decoder.decode(delivery.body, messageID: delivery.properties.messageID, enqueuedAt: enqueuedAt, chunk: chunk), nil)
        }
        let outcome = try reader.finish().get()
        var job = try decoder.decode(outcome.skeleton, messageID: delivery.properties.messageID, enqueuedAt: enqueuedAt, chunk: chunk)
        if !outcome.android.isEmpty { job.audience.fcmTokens = outcome.android }
        return (job, outcome.tokens)
    }

    /// Resolves the job's audience: its devices, for a job small enough to send here (or a chunk
    /// of the old kind, which names tokens); nil once a larger one is split into chunk jobs, made
    /// page by page as the audience is read.
    private func resolve(
        _ job: PushJob, explicit: ExplicitTokens, from delivery: JobDelivery, replyTo: String, unresolved: inout JobError?
    ) async throws -> AudiencePage? {
        var whole: AudiencePage?
        var error: JobError?
        try await resolver.resolve(job, explicit: explicit, pageSize: Self.pageSize) { audience in
            error = unresolvedError(audience.unresolved, of: job)
            if delivery.chunk == nil && audience.count > settings.nowMaxDevices {
                // Before the chunks: once they are confirmed, nothing may send the job back.
                if let error { try await publishUnresolved(error, of: job, to: replyTo) }
                if let scheduler {
                    // Before its chunks: from the first one on, a cancel can stop them.
                    let size = max(1, settings.chunkSize)
                    try await scheduler.store.started(JobRun(
                        jobID: job.id, app: job.app, idempotencyKey: job.idempotencyKey, devices: audience.count,
                        chunks: (audience.count + size - 1) / size, startedAt: scheduler.clock.now()))
                }
                try await splitter.split(job, audience, from: delivery)
                return
            }
            var all = AudiencePage()
            try await audience.forEachPage { page in
                all.recipients += page.recipients
                all.filtered += page.filtered
            }
            whole = all
        }
        unresolved = error
        return whole
    }

    /// Republishes a chunk as it is to the bulk lane, confirmed, and acknowledges it here.
    private func handToBulkLane(_ delivery: JobDelivery, app: String, chunk: String) async -> JobSettlement {
        let properties = delivery.properties.republished { headers in
            headers[WireHeader.enqueuedAt] = .int64(WireHeader.nowMilliseconds())
            delivery.markRepeat(&headers)
        }
        do {
            try await publisher.publish(.toQueue(settings.queues.bulkJobs(app: app), body: delivery.body, properties: properties))
            metrics.job(.movedToBulk, lane: lane)
            return .acknowledge
        } catch {
            logger.error("cannot hand a chunk on to the bulk lane; returning it to the queue", metadata: [
                "job": "\(delivery.properties.messageID ?? "unknown")", "chunk": "\(chunk)", "error": "\(error)",
            ])
            metrics.job(.requeued, lane: lane)
            return .requeue
        }
    }

    /// Devices read from the registry at a time.
    static let pageSize = 1000

    /// Users and groups nobody resolves would otherwise vanish from a job without a word: the
    /// producer learns it from the summary's error, the operator from the log.
    private func unresolvedError(_ unresolved: [String], of job: PushJob) -> JobError? {
        guard !unresolved.isEmpty else { return nil }
        logger.warning("audience entries this worker cannot resolve are skipped", metadata: [
            "job": "\(job.id)", "unresolved": "\(unresolved.prefix(10).joined(separator: ", "))",
        ])
        let field = job.audience.activity != nil ? "audience.activity" : job.audience.users.isEmpty ? "audience.groups" : "audience.users"
        let shown = unresolved.prefix(5).joined(separator: ", ") + (unresolved.count > 5 ? ", …" : "")
        return JobError(.unresolvedAudience, field: field,
            "\(field) cannot be resolved: this worker has no registry of users and groups, so \(unresolved.count) of the job's audience entries reached no device (\(shown)); only audience.tokens were sent")
    }

    /// A split job's chunks each have their own summary; the unresolved part of its audience is
    /// reported once, in a summary of its own (no chunk, no devices).
    private func publishUnresolved(_ error: JobError, of job: PushJob, to replyTo: String) async throws {
        try await results.publish(
            JobSummary(jobID: job.id, app: job.app, devices: 0, outcomes: [:], error: error, durationMilliseconds: 0), to: replyTo)
    }
}
