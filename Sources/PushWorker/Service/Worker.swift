import AMQP
import APNsHTTP2
import Foundation
import Logging
import ServiceLifecycle

/// Consumes push jobs and sees each one through: decode and validate, dead-letter what is
/// invalid, send the rest over the shared APNs clients, publish the results, acknowledge.
///
/// A job is acknowledged only after its results (or its dead letter) are confirmed by the broker,
/// so a worker killed at any moment loses nothing: the broker redelivers what was not acked.
public final class Worker: Service, Sendable {
    private let settings: WorkerSettings
    private let consumer: AMQPConsumer
    private let publisher: AMQPPublisher
    private let results: ResultPublisher
    private let replyQueues: ReplyQueues
    private let decoder: JobDecoder
    private let processors: [String: JobProcessor]
    private let clients: [APNsClient]
    private let resolver: any AudienceResolver
    private let logger: Logger
    /// Deliveries and the stop request, in one sequence, so a stop ends the loop even while no
    /// delivery comes, without closing the connection the jobs in hand still acknowledge on.
    private let events: AsyncStream<Event>
    private let eventSink: AsyncStream<Event>.Continuation

    private enum Event: Sendable {
        case delivery(AMQPDelivery)
        case stop
    }

    private init(
        settings: WorkerSettings, consumer: AMQPConsumer, publisher: AMQPPublisher, processors: [String: JobProcessor],
        clients: [APNsClient], resolver: any AudienceResolver, logger: Logger
    ) {
        self.settings = settings
        self.consumer = consumer
        self.publisher = publisher
        self.results = ResultPublisher(publisher: publisher)
        self.replyQueues = ReplyQueues(publisher: publisher)
        self.decoder = JobDecoder(apps: processors.mapValues(\.topic))
        self.processors = processors
        self.clients = clients
        self.resolver = resolver
        self.logger = logger
        (events, eventSink) = AsyncStream<Event>.makeStream()
    }

    /// Connects to the broker (declaring the topology) and builds one APNs client per app.
    /// Throws the first configuration or connection problem, naming it.
    public static func start(
        _ configuration: PushWorkerConfiguration, file: String, resolver: any AudienceResolver = ExplicitTokenResolver(), logger: Logger
    ) async throws -> Worker {
        let settings = configuration.worker
        let amqp = try settings.amqpConfiguration(file: file)
        var processors: [String: JobProcessor] = [:]
        var clients: [APNsClient] = []
        let publisher = try await AMQPPublisher.connect(amqp, logger: logger)
        let retry = RetryPolicy(
            maxAttempts: max(1, settings.retryMaxAttempts), inProcessAttempts: max(1, settings.retryInProcessAttempts),
            initialDelay: .milliseconds(settings.retryInitialDelayMilliseconds))
        for (index, app) in configuration.apps.enumerated() {
            let client = APNsClient(configuration: try app.clientConfiguration(file: file, index: index), logger: logger)
            clients.append(client)
            processors[app.name] = JobProcessor(
                client: client, topic: app.topic, appName: app.name, results: ResultPublisher(publisher: publisher),
                retry: retry, logger: logger)
        }
        let consumer = try await AMQPConsumer.connect(
            amqp, queue: settings.queues.jobs, prefetch: UInt16(settings.amqp.prefetch),
            streaming: AMQPBodyStreaming(threshold: streamJobsOverBytes) { _, size in StreamedJobReader(bodySize: size) },
            logger: logger)
        logger.info("worker started", metadata: [
            "queue": "\(settings.queues.jobs)", "prefetch": "\(settings.amqp.prefetch)",
            "apps": "\(configuration.apps.map(\.name).joined(separator: ","))",
        ])
        return Worker(
            settings: settings, consumer: consumer, publisher: publisher, processors: processors, clients: clients,
            resolver: resolver, logger: logger)
    }

    /// Processes jobs until `stop()` or a graceful shutdown of the service group (SIGTERM); then
    /// finishes the jobs in hand, acknowledges them and closes the connections. Deliveries not yet
    /// started go back to the queue.
    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await consume()
        } onGracefulShutdown: {
            self.stop()
        }
    }

    private func consume() async throws {
        let feeder = Task { [consumer, eventSink, logger] in
            do {
                for try await delivery in consumer { eventSink.yield(.delivery(delivery)) }
            } catch {
                logger.error("the job consumer stopped", metadata: ["error": "\(error)"])
            }
            eventSink.yield(.stop)
        }
        await withTaskGroup(of: Void.self) { jobs in
            for await event in events {
                guard case .delivery(let delivery) = event else { break }
                jobs.addTask { await self.handle(delivery) }
            }
            await jobs.waitForAll()
        }
        // Deliveries received but not started go back to the queue when the connection closes.
        await consumer.close()
        feeder.cancel()
        await publisher.close()
        for client in clients { client.shutdown() }
        logger.info("worker stopped")
    }

    /// Stops taking new jobs; `run` returns once the jobs in hand are done.
    public func stop() {
        eventSink.yield(.stop)
    }

    /// Job bodies larger than this are parsed as they arrive (`StreamedJobReader`) and never
    /// held whole; 1 MiB is ~15,000 tokens, well above a chunk job at the default chunk size.
    public static let streamJobsOverBytes = 1 << 20

    private func handle(_ delivery: AMQPDelivery) async {
        let enqueuedAt = delivery.properties.timestamp.map { Date(timeIntervalSince1970: Double($0)) } ?? Date()
        var job: PushJob
        var streamedTokens: DeviceTokenList?
        do {
            var body = delivery.body
            if let reader = delivery.streamedBody as? StreamedJobReader {
                let outcome = try reader.finish().get()
                body = outcome.skeleton
                streamedTokens = outcome.tokens
            }
            job = try decoder.decode(body, messageID: delivery.properties.messageID, enqueuedAt: enqueuedAt)
        } catch {
            await deadLetter(delivery, error)
            return
        }
        let replyTo = job.replyTo ?? delivery.properties.replyTo ?? settings.queues.results
        do {
            // Before anything is sent: results to a missing queue would be returned, the job
            // requeued, and every device sent again.
            guard try await replyQueues.exists(replyTo) else {
                await deadLetter(delivery, JobError(.invalidField, field: "reply_to",
                    "reply_to names queue '\(replyTo)', which does not exist; declare it before publishing the job"))
                return
            }
        } catch {
            logger.error("cannot check the reply queue; returning the job to the queue", metadata: ["job": "\(job.id)", "error": "\(error)"])
            try? await delivery.nack(requeue: true)
            return
        }
        // A retry job carries each device's attempts so far, in token order.
        let previous = delivery.properties.headers?[Self.attemptsHeader]?.arrayValue?.compactMap { $0.intValue.map(Int.init) }
        let chunk = delivery.properties.headers?[Self.chunkHeader]?.stringValue
        do {
            if var tokens = streamedTokens.take() {  // taken, so sorting it in place does not copy it
                if chunk == nil && tokens.count > settings.chunkSize {
                    let unresolved = try await split(job, streamed: &tokens, delivery: delivery)
                    if let unresolved { try await publishUnresolved(unresolved, of: job, to: replyTo) }
                    try await delivery.ack()
                    return
                }
                // A streamed chunk or retry job (a chunk size set above ~15,000): its tokens in order.
                job.audience.tokens = tokens.hex(0..<tokens.count)
            }
            // Chunks and retry jobs carry resolved devices: they are never resolved again.
            let audience = chunk == nil
                ? try await resolver.resolve(job, previousAttempts: previous)
                : try await ExplicitTokenResolver().resolve(job, previousAttempts: previous)
            let unresolved = warnUnresolved(audience, of: job)
            let recipients = audience.recipients
            if chunk == nil && recipients.count > settings.chunkSize {
                try await split(job, recipients: recipients, delivery: delivery)
                if let unresolved { try await publishUnresolved(unresolved, of: job, to: replyTo) }
                try await delivery.ack()
                return
            }
            guard let processor = processors[job.app] else {
                // The decoder only accepts configured apps; this keeps a job from hanging unacked if that ever changes.
                await deadLetter(delivery, JobError(.unknownApp, field: "app", "app '\(job.app)' is not configured"))
                return
            }
            let report = try await processor.process(
                job, recipients: recipients, filtered: audience.filtered, replyTo: replyTo, chunk: chunk, error: unresolved)
            if !report.handedOn.isEmpty {
                try await handOn(job, report.handedOn, delivery: delivery)
            }
            try await delivery.ack()
        } catch {
            // Results could not all be confirmed: give the job back; the delivery limit
            // dead-letters it if this keeps happening.
            logger.error("job failed; returning it to the queue", metadata: ["job": "\(job.id)", "error": "\(error)"])
            try? await delivery.nack(requeue: true)
        }
    }

    /// Marks a chunk job (`"2/5"`): it is sent as it is, never split or resolved again.
    static let chunkHeader = "x-pushworker-chunk"

    /// Republishes a large job as chunk jobs on the jobs queue, so every worker can take a share.
    /// All chunks are confirmed before the original is acknowledged; a crash in between only
    /// repeats chunks. A device named twice is sent once, even across chunks.
    private func split(_ job: PushJob, recipients: [Recipient], delivery: AMQPDelivery) async throws {
        var seen = Set<String>()
        let unique = recipients.filter { seen.insert($0.token).inserted }
        try await publishChunks(of: job, devices: unique.count, delivery: delivery) { range in unique[range].map(\.token) }
    }

    /// The same for a streamed job: its explicit tokens, plus the devices of its users and groups.
    private func split(_ job: PushJob, streamed tokens: inout DeviceTokenList, delivery: AMQPDelivery) async throws -> JobError? {
        let others = try await resolver.resolve(job, previousAttempts: nil)
        let unresolved = warnUnresolved(others, of: job)
        for recipient in others.recipients { tokens.append(hex: recipient.token.utf8) }
        tokens.sortAndRemoveDuplicates()
        let unique = tokens
        try await publishChunks(of: job, devices: unique.count, delivery: delivery) { range in unique.hex(range) }
        return unresolved
    }

    /// Chunk bodies are made as they go out, a few confirms at a time, so a million-device job
    /// never has all its chunks in memory at once.
    private func publishChunks(
        of job: PushJob, devices: Int, delivery: AMQPDelivery, tokens: (Range<Int>) -> [String]
    ) async throws {
        let size = max(1, settings.chunkSize)
        let count = (devices + size - 1) / size
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                if index >= Self.chunksInFlight { try await group.next() }
                var properties = delivery.properties
                var headers = Self.ownHeaders(properties.headers)
                headers[Self.chunkHeader] = .string("\(index + 1)/\(count)")
                properties.headers = headers
                properties.persistent = true
                properties.messageID = "\(job.id)#\(index + 1)"
                let body = job.chunkBody(tokens: tokens((index * size)..<min(devices, (index + 1) * size)))
                let message = AMQPMessage.toQueue(settings.queues.jobs, body: body, properties: properties)
                group.addTask { try await self.publisher.publish(message) }
            }
            try await group.waitForAll()
        }
        logger.info("job split into chunks", metadata: ["job": "\(job.id)", "devices": "\(devices)", "chunks": "\(count)"])
    }

    static let chunksInFlight = 32

    /// Users and groups nobody resolves would otherwise vanish from a job without a word: the
    /// producer learns it from the summary's error, the operator from the log.
    private func warnUnresolved(_ audience: ResolvedAudience, of job: PushJob) -> JobError? {
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

    /// The headers a republished job keeps: the producer's and ours, not the broker's bookkeeping
    /// of the original message (x-death, x-delivery-count), which would only mislead.
    static func ownHeaders(_ headers: AMQPTable?) -> AMQPTable {
        (headers ?? [:]).filter { $0.key != "x-death" && $0.key != "x-delivery-count" }
    }

    static let attemptsHeader = "x-pushworker-attempts"
    static let roundHeader = "x-pushworker-retry-round"

    /// Publishes the devices still failing as a retry job to the delayed retry queue of the next
    /// round, confirmed, before the job is acknowledged. It comes back to the jobs queue when its
    /// pause is over, as a chunk (never split again), with the attempts made so far.
    private func handOn(_ job: PushJob, _ recipients: [Recipient], delivery: AMQPDelivery) async throws {
        let round = Int(delivery.properties.headers?[Self.roundHeader]?.intValue ?? 0)
        let delays = settings.retryDelaysMilliseconds
        let delay = delays[min(round, delays.count - 1)]
        var properties = delivery.properties
        var headers = Self.ownHeaders(properties.headers)
        headers[Self.chunkHeader] = headers[Self.chunkHeader] ?? .string("retry")
        headers[Self.attemptsHeader] = .array(recipients.map { .int64(Int64($0.previousAttempts)) })
        headers[Self.roundHeader] = .int64(Int64(round + 1))
        properties.headers = headers
        properties.persistent = true
        properties.messageID = "\(job.id)#retry\(round + 1)"
        try await publisher.publish(.toQueue(
            settings.queues.retryQueue(milliseconds: delay), body: job.chunkBody(tokens: recipients.map(\.token)), properties: properties))
        logger.info("devices handed on to a retry job", metadata: ["job": "\(job.id)", "devices": "\(recipients.count)", "delay_ms": "\(delay)"])
    }

    /// Moves an invalid job to the dead letters with the reason in its headers, tells the
    /// producer when it named a reply queue, and acknowledges the original.
    private func deadLetter(_ delivery: AMQPDelivery, _ error: JobError) async {
        let jobID = delivery.properties.messageID ?? "unknown"
        logger.warning("job refused", metadata: ["job": "\(jobID)", "error": "\(error.code.rawValue)", "message": "\(error.message)"])
        guard delivery.streamedBody == nil else {
            // Its body was never held, so it cannot be republished with our headers: the broker
            // dead-letters the original (x-death reason "rejected"); the reason is in the log
            // line above and in the error summary.
            do { try await delivery.reject(requeue: false) } catch {
                logger.error("cannot dead-letter the job; the broker will deliver it again", metadata: ["job": "\(jobID)", "error": "\(error)"])
                return
            }
            await sendErrorSummary(delivery, jobID: jobID, error)
            return
        }
        var properties = delivery.properties
        var headers = properties.headers ?? [:]
        headers["x-pushworker-error"] = .string(error.code.rawValue)
        headers["x-pushworker-error-message"] = .string(error.message)
        if let field = error.field { headers["x-pushworker-error-field"] = .string(field) }
        properties.headers = headers
        properties.persistent = true
        do {
            try await publisher.publish(AMQPMessage(
                exchange: settings.queues.deadLetterExchange, routingKey: settings.queues.jobs, body: delivery.body,
                properties: properties, mandatory: true))
        } catch {
            logger.error("cannot dead-letter the job; returning it to the queue", metadata: ["job": "\(jobID)", "error": "\(error)"])
            try? await delivery.nack(requeue: true)
            return
        }
        await sendErrorSummary(delivery, jobID: jobID, error)
        try? await delivery.ack()
    }

    /// To the job's own `reply_to` when its body names one (unless that is the fault), else to the
    /// AMQP `reply_to` property, as for results of a valid job.
    private func sendErrorSummary(_ delivery: AMQPDelivery, jobID: String, _ error: JobError) async {
        let named = error.field == "reply_to" || delivery.streamedBody != nil ? nil : JobDecoder.replyTo(in: delivery.body)
        guard let replyTo = named ?? delivery.properties.replyTo else { return }
        let summary = JobSummary(jobID: jobID, app: nil, devices: 0, outcomes: [:], error: error, durationMilliseconds: 0)
        do { try await results.publish(summary, to: replyTo) } catch {
            logger.warning("cannot send the error summary", metadata: ["job": "\(jobID)", "reply_to": "\(replyTo)", "error": "\(error)"])
        }
    }
}
