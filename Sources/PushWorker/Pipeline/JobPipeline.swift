import DeviceTokens
import APNs
import AMQP
import Foundation
import Logging
import Registry

/// What happens to one job, from its body to how its delivery is settled:
/// decode → check the reply queue → resolve → split (large) or send → hand on → acknowledge.
///
/// It holds no connection: it sends through `NotificationSending` and publishes through
/// `MessagePublishing`, so every branch (a job read whole or streamed, a chunk, a retry, a refusal)
/// runs in a test with stand-ins, and the `Worker` around it only consumes and settles.
public struct JobPipeline: Sendable {
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

        public init(
            name: String, topic: String, sender: any NotificationSending,
            admission: DeviceAdmission = DeviceAdmission(maxInFlight: AppConfiguration.defaultMaxInFlight),
            defaultExpiration: DefaultExpiration? = nil, defaultResults: PushJob.ResultsMode? = nil, timeZone: TimeZone = .gmt,
            quietHours: PushJob.QuietHoursMode = .defer, caps: [FrequencyCap] = []
        ) {
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
    private let ledger: (any DeliveryLedgerWriting)?
    private let scheduler: JobScheduler?
    /// Quiet hours, from the registry; nil without one.
    private let quietHours: QuietHoursGate?
    private let apps: [String: App]
    private let metrics: WorkerMetrics
    private let logger: Logger

    /// - Parameter lane: the queue the deliveries come from; the now lane hands chunks of split
    ///   jobs on to the bulk lane, and its devices go ahead of the bulk lane's for APNs.
    public init(
        settings: WorkerSettings, lane: Lane = .now, apps: [App], publisher: any MessagePublishing,
        resolver: any AudienceResolver = ExplicitTokenResolver(), feedback: (any DeviceFeedback)? = nil,
        badges: (any BadgeCounter)? = nil, ledger: (any DeliveryLedgerWriting)? = nil, scheduler: JobScheduler? = nil,
        registry: (any RegistryStore)? = nil, metrics: WorkerMetrics = WorkerMetrics(), logger: Logger
    ) {
        self.scheduler = scheduler
        quietHours = registry.map { QuietHoursGate(store: $0) }
        self.apps = Dictionary(apps.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
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
                (app.name, JobProcessor(
                    client: app.sender, admission: app.admission, topic: app.topic, appName: app.name, results: results, retry: settings.retryPolicy,
                    lane: lane, feedback: feedback, badges: badges, ledger: ledger, metrics: metrics, logger: logger))
            },
            uniquingKeysWith: { first, _ in first })
        self.results = results
        self.replyQueues = ReplyQueues(publisher: publisher)
        self.resolver = resolver
        self.splitter = JobSplitter(publisher: publisher, queues: settings.queues, chunkSize: settings.chunkSize, logger: logger)
        self.retries = RetryHandOff(
            publisher: publisher, queues: settings.queues, delaysMilliseconds: settings.retryDelaysMilliseconds, metrics: metrics, logger: logger)
        self.ledger = ledger
        self.refusal = JobRefusal(publisher: publisher, results: results, queues: settings.queues, lane: lane, metrics: metrics, logger: logger)
        self.metrics = metrics
        self.logger = logger
    }

    /// Sees one job through. Never throws: every failure ends in a settlement, and a job is
    /// acknowledged only once its results, chunks, hand-ons or dead letter are confirmed.
    public func run(_ delivery: JobDelivery) async -> JobSettlement {
        let start = ContinuousClock.now
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
            if let key = job.idempotencyKey, delivery.chunk == nil {
                // Chunk and retry jobs carry no key: their job took it.
                guard let ledger else {
                    return await refusal.refuse(delivery, JobError(.invalidField, field: "idempotency_key",
                        "idempotency_key needs the delivery ledger, and this worker keeps none (ledger: off, or no registry and no ledger.sqlite)"))
                }
                let released = delivery.properties.headers?[WireHeader.released] != nil
                switch await ledger.claim(key: key, app: job.app, job: job.id, again: delivery.redelivered || released) {
                case .taken:
                    break
                case .duplicate(let first):
                    var summary = JobSummary(jobID: job.id, app: job.app, devices: 0, outcomes: [:], durationMilliseconds: 0)
                    summary.duplicateOf = first
                    try await results.publish(summary, to: replyTo)
                    logger.info("job not sent: its idempotency key was taken by an earlier job", metadata: ["job": "\(job.id)", "duplicate_of": "\(first)"])
                    metrics.job(.duplicate, lane: lane)
                    return .acknowledge
                case .unavailable(let problem):
                    logger.error("cannot check the job's idempotency key; returning it to the queue", metadata: ["job": "\(job.id)", "error": "\(problem)"])
                    metrics.job(.requeued, lane: lane)
                    return .requeue
                }
            }
            if job.sendAt != nil, let settlement = try await holdIfAhead(job, delivery, replyTo: replyTo) {
                return settlement
            }
            if let localTime = job.localTime, delivery.chunk == nil {
                return try await holdByZone(job, at: localTime, streamed: streamed.take(), delivery: delivery, replyTo: replyTo)
            }
            if let channel = job.audience.channel {
                _ = try await processor.broadcast(job, channel: channel, replyTo: replyTo, chunk: delivery.chunk, consultLedger: delivery.mayRepeat)
                metrics.job(.done, lane: lane)
                return .acknowledge
            }
            let attempts = RetryHandOff.previousAttempts(of: job, delivery)
            let badges = job.badge == nil ? [:] : RetryHandOff.badges(of: job, delivery)
            let audience: AudiencePage
            var unresolved: JobError?
            if job.audience.isResolved {
                // A chunk or retry job: its devices were resolved by the worker that split it.
                audience = AudiencePage(recipients: job.audience.devices, filtered: job.audience.filtered)
            } else {
                let explicit: ExplicitTokens
                if let list = streamed.take() {
                    // Handed over, not copied: a shared list would be copied whole to be sorted.
                    explicit = ExplicitTokens(consume list)
                } else {
                    explicit = ExplicitTokens(job.audience.tokens)
                }
                job.audience.tokens = []  // held once, in `explicit`
                guard let whole = try await resolve(job, explicit: explicit, from: delivery, replyTo: replyTo, unresolved: &unresolved) else {
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
            // A chunk (or its retry) of a job split into chunk jobs: a cancel stops it.
            let cancelled: (@Sendable () async -> Bool)? = if delivery.chunk != nil, let watch = scheduler?.cancellations {
                { [id = job.id, app = job.app] in await watch.isCancelled(job: id, app: app) }
            } else { nil }
            var withheld: [(recipient: Recipient, reason: String)] = [], deferred = 0
            if let gate = quietHours, let app = apps[job.app], !recipients.isEmpty {
                let mode = job.quietHours ?? app.quietHours
                if mode != .ignore {
                    let quieted: [Recipient]
                    (recipients, quieted, deferred) = try await quiet(recipients, of: job, mode: mode, gate: gate, app: app, replyTo: replyTo, chunk: delivery.chunk)
                    withheld += quieted.map { ($0, JobProcessor.quietHours) }
                }
            }
            if let scheduler, let app = apps[job.app], app.caps.contains(where: { $0.applies(to: job.type) }), !recipients.isEmpty {
                let capped: [Recipient]
                (recipients, capped) = try await cap(recipients, of: job, caps: app.caps, store: scheduler.store, now: scheduler.clock.now())
                withheld += capped.map { ($0, JobProcessor.frequencyCap) }
            }
            let report = try await processor.process(
                job, recipients: recipients, filtered: audience.filtered, replyTo: replyTo, chunk: delivery.chunk, error: unresolved,
                consultLedger: delivery.mayRepeat, isCurrent: delivery.isCurrent, cancelled: cancelled, withheld: withheld, deferred: deferred)
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

    /// Holds a job whose `send_at` is ahead in the schedule and answers with a summary saying
    /// when (nil: it is due, and sent now). A job with a `send_at` and no schedule to hold it is
    /// refused rather than sent early.
    private func holdIfAhead(_ job: PushJob, _ delivery: JobDelivery, replyTo: String) async throws -> JobSettlement? {
        guard let scheduler else {
            let due = job.sendAt.map { $0.timeIntervalSinceNow <= 0 } ?? true
            if due || delivery.chunk != nil || delivery.properties.headers?[WireHeader.released] != nil { return nil }
            return await refusal.refuse(delivery, JobError(.invalidField, field: "send_at",
                "send_at needs the schedule, kept in the delivery ledger's store, and this worker keeps none (ledger: off, or no registry and no ledger.sqlite)"))
        }
        let now = scheduler.clock.now()
        guard scheduler.holds(job, delivery, now: now) else { return nil }
        let held: ScheduledJob
        do {
            held = try await scheduler.hold(job, delivery, replyTo: delivery.properties.replyTo, now: now)
        } catch let error as JobError {
            return await refusal.refuse(delivery, error)
        } catch {
            logger.error("cannot hold the scheduled job; returning it to the queue", metadata: ["job": "\(job.id)", "error": "\(error)"])
            metrics.job(.requeued, lane: lane)
            return .requeue
        }
        var summary = JobSummary(jobID: job.id, app: job.app, devices: 0, outcomes: [:], durationMilliseconds: 0)
        summary.scheduledFor = JobScheduler.rfc3339(held.releaseAt)
        try await results.publish(summary, to: replyTo)
        logger.info("job held until its send_at", metadata: ["job": "\(job.id)", "app": "\(job.app)", "send_at": "\(summary.scheduledFor ?? "")"])
        metrics.job(.scheduled, lane: lane)
        return .acknowledge
    }

    /// Takes out the devices whose users are in their quiet hours: those the job drops, and those
    /// it defers, each group held in the schedule as a part of the job (a chunk job of its devices,
    /// label "deferred", quiet hours ignored) released at its window's end. Without a schedule to
    /// hold them, deferred devices are dropped.
    private func quiet(
        _ recipients: [Recipient], of job: PushJob, mode: PushJob.QuietHoursMode, gate: QuietHoursGate, app: App, replyTo: String, chunk: String?
    ) async throws -> (send: [Recipient], dropped: [Recipient], deferred: Int) {
        let now = scheduler?.clock.now() ?? WallClock.system.now()
        let split = try await gate.split(recipients, of: job, mode: mode, zone: app.timeZone, now: now)
        guard !split.deferred.isEmpty else { return (split.send, split.dropped, 0) }
        guard let scheduler else {
            logger.warning("devices in their quiet hours dropped, not deferred: deferring needs the schedule (ledger: off)", metadata: ["job": "\(job.id)"])
            return (split.send, split.dropped + split.deferred.values.flatMap { $0 }, 0)
        }
        var part = job
        part.quietHours = .ignore
        part.sendAt = nil
        var deferred = 0
        for (end, devices) in split.deferred.sorted(by: { $0.key < $1.key }) {
            let body = try part.chunkBody(devices: devices)
            try await scheduler.store.hold(ScheduledJob(
                jobID: "\(job.id)~quiet~\(chunk ?? "whole")~\(end)", app: job.app, releaseAt: end, body: String(decoding: body, as: UTF8.self),
                replyTo: replyTo, heldAt: now, chunk: Self.deferredChunk))
            deferred += devices.count
        }
        logger.info("devices in their quiet hours held until the window ends", metadata: [
            "job": "\(job.id)", "chunk": "\(chunk ?? "-")", "deferred": "\(deferred)", "parts": "\(split.deferred.count)",
        ])
        return (split.send, split.dropped, deferred)
    }

    /// Counts the job against the app's caps of its type, per user, and takes out the devices of
    /// users over one. Devices without a user are never capped.
    private func cap(_ recipients: [Recipient], of job: PushJob, caps: [FrequencyCap], store: any JobSchedule, now: Int64) async throws -> (send: [Recipient], capped: [Recipient]) {
        var send = recipients, capped: [Recipient] = []
        for cap in caps where cap.applies(to: job.type) {
            let users = Array(Set(send.compactMap(\.user)))
            guard !users.isEmpty else { break }
            let over = try await store.takeCap(cap.key, app: job.app, users: users, job: job.id, max: cap.max, since: now - Int64(cap.per) * 1000, now: now)
            guard !over.isEmpty else { continue }
            capped += send.filter { $0.user.map(over.contains) ?? false }
            send.removeAll { $0.user.map(over.contains) ?? false }
        }
        if !capped.isEmpty {
            logger.info("devices over a frequency cap not sent", metadata: ["job": "\(job.id)", "type": "\(job.type ?? "-")", "capped": "\(capped.count)"])
        }
        return (send, capped)
    }

    /// A `local_time` job: its audience read page by page, each device placed at the instant its
    /// zone's clock shows the time (the device's zone, else its user's, else the app's), and the
    /// devices of one instant held together as parts of the job (chunk jobs, label "local", at
    /// most `chunk_size` devices each) that the releasers send at that instant. At most one part
    /// per distinct instant is in memory: a million-device group is never held whole.
    private func holdByZone(_ job: PushJob, at localTime: LocalTime, streamed: DeviceTokenList?, delivery: JobDelivery, replyTo: String) async throws -> JobSettlement {
        guard let scheduler, let app = apps[job.app] else {
            return await refusal.refuse(delivery, JobError(.invalidField, field: "local_time",
                "local_time needs the schedule, kept in the delivery ledger's store, and this worker keeps none (ledger: off, or no registry and no ledger.sqlite)"))
        }
        let now = scheduler.clock.now()
        let explicit: ExplicitTokens = if let streamed { ExplicitTokens(consume streamed) } else { ExplicitTokens(job.audience.tokens) }
        var part = job
        part.localTime = nil
        part.audience.tokens = []
        let size = max(1, settings.chunkSize)
        var pending: [Int64: AudiencePage] = [:]
        var parts = 0, devices = 0, earliest = Int64.max
        var instants: [String: Int64] = [:]
        func instant(inZone name: String?) -> Int64 {
            let key = name ?? ""
            if let known = instants[key] { return known }
            let found = localTime.instant(in: name.flatMap(TimeZone.init(identifier:)) ?? app.timeZone, after: now)
            instants[key] = found
            return found
        }
        func hold(_ page: AudiencePage, at releaseAt: Int64) async throws {
            parts += 1
            try await scheduler.store.hold(ScheduledJob(
                jobID: "\(job.id)~local~\(releaseAt)~\(parts)", app: job.app, releaseAt: releaseAt,
                body: String(decoding: try part.chunkBody(devices: page.recipients, filtered: page.filtered), as: UTF8.self), replyTo: replyTo, heldAt: now,
                chunk: Self.localChunk))
            earliest = min(earliest, releaseAt)
        }
        try await resolver.resolve(job, explicit: explicit, pageSize: Self.pageSize) { audience in
            // Its parts can be cancelled as a split job's chunks are.
            try await scheduler.store.started(JobRun(
                jobID: job.id, app: job.app, idempotencyKey: job.idempotencyKey, devices: audience.count, chunks: (audience.count + size - 1) / size, startedAt: now))
            try await audience.forEachPage { page in
                // Every device: one without a user may have a zone of its own.
                let timing = try await quietHours?.store.timing(
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
        try await results.publish(summary, to: replyTo)
        logger.info("job held by its devices' zones until their local_time", metadata: [
            "job": "\(job.id)", "local_time": "\(localTime.text)", "devices": "\(devices)", "parts": "\(parts)", "zones": "\(instants.count)",
        ])
        metrics.job(.scheduled, lane: lane)
        return .acknowledge
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
        return (try decoder.decode(outcome.skeleton, messageID: delivery.properties.messageID, enqueuedAt: enqueuedAt, chunk: chunk), outcome.tokens)
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
