import AMQP
import Foundation
import Logging

/// What happens to one job, from its body to how its delivery is settled:
/// decode → check the reply queue → resolve → split (large) or send → hand on → acknowledge.
///
/// It holds no connection: it sends through `NotificationSending` and publishes through
/// `MessagePublishing`, so every branch (a job read whole or streamed, a chunk, a retry, a refusal)
/// runs in a test with stand-ins, and the `Worker` around it only consumes and settles.
public struct JobPipeline: Sendable {
    /// A configured app: its name, default topic, and the client that sends for it.
    public struct App: Sendable {
        public var name: String
        public var topic: String
        public var sender: any NotificationSending

        public init(name: String, topic: String, sender: any NotificationSending) {
            self.name = name
            self.topic = topic
            self.sender = sender
        }
    }

    private let settings: WorkerSettings
    private let decoder: JobDecoder
    private let processors: [String: JobProcessor]
    private let results: ResultPublisher
    private let replyQueues: ReplyQueues
    private let resolver: any AudienceResolver
    private let splitter: JobSplitter
    private let retries: RetryHandOff
    private let refusal: JobRefusal
    private let logger: Logger

    public init(
        settings: WorkerSettings, apps: [App], publisher: any MessagePublishing, resolver: any AudienceResolver = ExplicitTokenResolver(),
        feedback: (any DeviceFeedback)? = nil, logger: Logger
    ) {
        let results = ResultPublisher(publisher: publisher)
        self.settings = settings
        self.decoder = JobDecoder(apps: Dictionary(apps.map { ($0.name, $0.topic) }, uniquingKeysWith: { first, _ in first }))
        self.processors = Dictionary(
            apps.map { app in
                (app.name, JobProcessor(
                    client: app.sender, topic: app.topic, appName: app.name, results: results, retry: settings.retryPolicy,
                    feedback: feedback, logger: logger))
            },
            uniquingKeysWith: { first, _ in first })
        self.results = results
        self.replyQueues = ReplyQueues(publisher: publisher)
        self.resolver = resolver
        self.splitter = JobSplitter(publisher: publisher, jobsQueue: settings.queues.jobs, chunkSize: settings.chunkSize, logger: logger)
        self.retries = RetryHandOff(publisher: publisher, queues: settings.queues, delaysMilliseconds: settings.retryDelaysMilliseconds, logger: logger)
        self.refusal = JobRefusal(publisher: publisher, results: results, queues: settings.queues, logger: logger)
        self.logger = logger
    }

    /// Sees one job through. Never throws: every failure ends in a settlement, and a job is
    /// acknowledged only once its results, chunks, hand-ons or dead letter are confirmed.
    public func run(_ delivery: JobDelivery) async -> JobSettlement {
        var job: PushJob
        var streamed: DeviceTokenList?
        do {
            (job, streamed) = try decode(delivery)
        } catch {
            return await refusal.refuse(delivery, error)
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
            if var tokens = streamed.take() {  // taken, so sorting it in place does not copy it
                if delivery.chunk == nil && tokens.count > settings.chunkSize {
                    try await splitStreamed(job, &tokens, from: delivery, replyTo: replyTo)
                    return .acknowledge
                }
                // A streamed chunk or retry job (a chunk size set above ~15,000): its tokens in order.
                job.audience.tokens = tokens.hex(0..<tokens.count)
            }
            let audience = try await resolve(job, from: delivery)
            let unresolved = unresolvedError(audience, of: job)
            if delivery.chunk == nil && audience.recipients.count > settings.chunkSize {
                // Before the chunks: once they are confirmed, nothing may send the job back.
                if let unresolved { try await publishUnresolved(unresolved, of: job, to: replyTo) }
                let recipients = audience.recipients
                try await splitter.split(job, devices: recipients.count, from: delivery) { range in recipients[range].map(\.token) }
                return .acknowledge
            }
            let report = try await processor.process(
                job, recipients: audience.recipients, filtered: audience.filtered, replyTo: replyTo, chunk: delivery.chunk, error: unresolved)
            if !report.handedOn.isEmpty {
                try await retries.handOn(job, report.handedOn, from: delivery)
            }
            return .acknowledge
        } catch {
            logger.error("job failed; returning it to the queue", metadata: ["job": "\(job.id)", "error": "\(error)"])
            return .requeue
        }
    }

    /// The job, and for a streamed body its tokens as bytes (the job itself then holds none).
    private func decode(_ delivery: JobDelivery) throws(JobError) -> (PushJob, DeviceTokenList?) {
        let enqueuedAt = delivery.properties.timestamp.map { Date(timeIntervalSince1970: Double($0)) } ?? Date()
        guard let reader = delivery.streamed else {
            return (try decoder.decode(delivery.body, messageID: delivery.properties.messageID, enqueuedAt: enqueuedAt), nil)
        }
        let outcome = try reader.finish().get()
        return (try decoder.decode(outcome.skeleton, messageID: delivery.properties.messageID, enqueuedAt: enqueuedAt), outcome.tokens)
    }

    /// The job's devices, each once, with the sends a retry job's devices have had so far.
    private func resolve(_ job: PushJob, from delivery: JobDelivery) async throws -> ResolvedAudience {
        var audience = try await resolver.resolve(job).deduplicated()
        let attempts = RetryHandOff.previousAttempts(of: job, delivery)
        if !attempts.isEmpty {
            for index in audience.recipients.indices {
                audience.recipients[index].previousAttempts = attempts[audience.recipients[index].token] ?? 0
            }
        }
        return audience
    }

    /// A streamed job's explicit tokens, plus the devices of its users and groups, each once.
    private func splitStreamed(_ job: PushJob, _ tokens: inout DeviceTokenList, from delivery: JobDelivery, replyTo: String) async throws {
        let others = try await resolver.resolve(job)
        if let unresolved = unresolvedError(others, of: job) { try await publishUnresolved(unresolved, of: job, to: replyTo) }
        for recipient in others.recipients { tokens.append(hex: recipient.token.utf8) }
        tokens.sortAndRemoveDuplicates()
        let unique = tokens
        try await splitter.split(job, devices: unique.count, from: delivery) { range in unique.hex(range) }
    }

    /// Users and groups nobody resolves would otherwise vanish from a job without a word: the
    /// producer learns it from the summary's error, the operator from the log.
    private func unresolvedError(_ audience: ResolvedAudience, of job: PushJob) -> JobError? {
        guard !audience.unresolved.isEmpty else { return nil }
        logger.warning("audience entries this worker cannot resolve are skipped", metadata: [
            "job": "\(job.id)", "unresolved": "\(audience.unresolved.prefix(10).joined(separator: ", "))",
        ])
        let field = job.audience.users.isEmpty ? "audience.groups" : "audience.users"
        let shown = audience.unresolved.prefix(5).joined(separator: ", ") + (audience.unresolved.count > 5 ? ", …" : "")
        return JobError(.unresolvedAudience, field: field,
            "\(field) cannot be resolved: this worker has no registry of users and groups, so \(audience.unresolved.count) of the job's audience entries reached no device (\(shown)); only audience.tokens were sent")
    }

    /// A split job's chunks each have their own summary; the unresolved part of its audience is
    /// reported once, in a summary of its own (no chunk, no devices).
    private func publishUnresolved(_ error: JobError, of job: PushJob, to replyTo: String) async throws {
        try await results.publish(
            JobSummary(jobID: job.id, app: job.app, devices: 0, outcomes: [:], error: error, durationMilliseconds: 0), to: replyTo)
    }
}
