import AMQP
import APNs
import Foundation
import Logging
import Stores
import Synchronization

/// Sends one job to its recipients and publishes one final result per device, then the summary.
/// Returns once every result is confirmed by the broker: only then may the job be acknowledged.
/// Recipients come deduplicated (`ExplicitTokens` and the registry hand each device over once).
public struct JobProcessor: Sendable {
    /// The app's APNs client.
    public var client: any NotificationSending
    /// The app's bound on devices in flight, shared by every job of the app in both lanes.
    public var admission: DeviceAdmission
    /// The app's default topic.
    public var topic: String
    public var appName: String
    public var results: ResultPublisher
    public var retry: RetryPolicy
    /// The lane the processor serves, which sets its claim on the admission slots.
    public var lane: Lane
    /// Told of devices APNs rejected for good (the registry, when there is one).
    public var feedback: (any DeviceFeedback)?
    /// Counts badges for jobs that ask (the registry, when there is one).
    public var badges: (any BadgeCounter)?
    /// Keeps every device's final result once it is final (see `report`), and knows the devices
    /// of a job that comes back which have one already (`ledger:` on).
    public var ledger: (any PipelineLedger)?
    public var metrics: WorkerMetrics
    public var logger: Logger
    /// The app's FCM side, for its Android devices; nil for an app on APNs only.
    public var fcm: (any FCMSending)?

    public init(
        client: any NotificationSending, admission: DeviceAdmission, topic: String, appName: String, results: ResultPublisher, retry: RetryPolicy = RetryPolicy(),
        lane: Lane = .now, feedback: (any DeviceFeedback)? = nil, badges: (any BadgeCounter)? = nil, ledger: (any PipelineLedger)? = nil,
        metrics: WorkerMetrics = WorkerMetrics(), logger: Logger = Logger(label: "pushworker.job")
    ) {
        self.ledger = ledger
        self.badges = badges
        self.lane = lane
        self.metrics = metrics
        self.client = client
        self.admission = admission
        self.topic = topic
        self.appName = appName
        self.results = results
        self.retry = retry
        self.feedback = feedback
        self.logger = logger
    }

    /// The job's delivery went with its connection (a node lost): the broker delivers it again,
    /// so nothing more of it is sent here.
    public struct DeliveryLost: Error {}

    /// What became of a job: its summary, and the devices to try again later (in a retry job).
    public struct Report: Sendable {
        public var summary: JobSummary
        public var handedOn: [Recipient]
    }

    enum DeviceEnd: Sendable {
        case final(Outcome)
        case handOn(Recipient)
    }

    /// What the devices of one job came to, recorded by their tasks as they finish.
    final class DeviceEnds: Sendable {
        private let state: Mutex<(outcomes: [Outcome: Int], handedOn: [Recipient])>
        /// Results the broker returned because the reply queue vanished mid-job.
        let unroutable = Atomic<Int>(0)
        /// Devices the registry dropped on APNs' word.
        let removed = Atomic<Int>(0)
        /// Devices whose result was published again from the ledger (a job that came back).
        let fromLedger = Atomic<Int>(0)
        /// A `results: batched` job's results not yet published.
        let batch: ResultBatch?
        /// The job's chunk, for the ledger's records.
        let chunk: String?

        init(batch: ResultBatch?, chunk: String?) {
            state = Mutex(([:], []))
            self.batch = batch
            self.chunk = chunk
        }

        func record(_ outcomes: [Outcome: Int]) {
            state.withLock { state in state.outcomes.merge(outcomes, uniquingKeysWith: +) }
        }

        func record(_ end: DeviceEnd) {
            state.withLock { state in
                switch end {
                case .final(let outcome): state.outcomes[outcome, default: 0] += 1
                case .handOn(let recipient): state.handedOn.append(recipient)
                }
            }
        }

        var outcomes: [Outcome: Int] { state.withLock { $0.outcomes } }
        var handedOn: [Recipient] { state.withLock { $0.handedOn } }
    }

    /// Sends `devices.send`, gives every other device its result, and publishes the summary.
    /// - Parameter error: what the summary reports besides the outcomes (an audience it could
    ///   not resolve).
    public func process(_ job: PushJob, devices sorted: JobDevices, part: JobPart = JobPart(), replyTo: String, error: JobError? = nil) async throws -> Report {
        let start = ContinuousClock.now
        let chunk = part.chunk
        let ends = DeviceEnds(batch: job.results == .batched ? ResultBatch(jobID: job.id, app: appName, chunk: chunk) : nil, chunk: chunk)
        let devices = sorted.count
        var sorted = sorted
        if part.mayRepeat, let ledger {
            // A job or chunk that came back (a node lost, a worker killed): the devices the ledger
            // holds had their result published already; count them, send and publish nothing.
            let held = await ledger.finals(job: job.id, app: appName, tokens: sorted.tokens)
            if !held.isEmpty {
                sorted.removeAll(heldIn: held)
                ends.record(held.values.reduce(into: [Outcome: Int]()) { counts, record in counts[Outcome(rawValue: record.outcome) ?? .failed, default: 0] += 1 })
                try await answerFromLedger(held.values, of: job, to: replyTo, ends: ends)
                logger.notice("job came back: devices with a result in the ledger are not sent again", metadata: [
                    "job": "\(job.id)", "chunk": "\(chunk ?? "-")", "skipped": "\(held.count)", "devices": "\(devices)",
                    "answered_from_ledger": "\(ends.fromLedger.load(ordering: .relaxed))",
                ])
            }
        }
        var recipients = sorted.send
        let (filtered, withheld, deferred) = (sorted.filtered, sorted.withheld, sorted.deferred)
        let (isCurrent, cancelled) = (part.isCurrent, part.cancelled)
        if !filtered.isEmpty { ends.record([.filtered: filtered.count]) }
        // A counted badge: each registered device's counter goes up before it is sent; a token the
        // registry does not know has no counter, and gets no made-up number.
        var badgeCounts: [String: Int] = [:]
        if let badge = job.badge {
            // A retry round's devices bring the count their first round gave them.
            // Android devices show no APNs badge: they are neither counted nor failed for it.
            for recipient in recipients { if let count = recipient.badge { badgeCounts[recipient.token] = count } }
            let fresh = recipients.filter { $0.badge == nil && $0.platform == .apns }.map(\.token)
            if !fresh.isEmpty, let badges {
                badgeCounts.merge(try await badges.incrementBadges(app: appName, tokens: fresh, by: badge.amount, job: job.id)) { _, new in new }
            }
            let uncounted = recipients.filter { $0.platform == .apns && badgeCounts[$0.token] == nil }
            if !uncounted.isEmpty {
                recipients.removeAll { $0.platform == .apns && badgeCounts[$0.token] == nil }
                ends.record([.failed: uncounted.count])
                for recipient in uncounted {
                    try await report(
                        PushResult(of: recipient, jobID: job.id, app: appName, outcome: .failed,
                                   reason: Self.badgeNeedsRegistration, attempts: 0),
                        of: job, to: replyTo, ends: ends)
                    metrics.notification(app: appName, platform: recipient.platform, outcome: .failed, reason: Self.badgeNeedsRegistration)
                }
            }
        }
        for recipient in filtered {
            try await report(
                PushResult(of: recipient, jobID: job.id, app: appName, outcome: .filtered, attempts: 0),
                of: job, to: replyTo, ends: ends)
            metrics.notification(app: appName, platform: recipient.platform, outcome: .filtered, reason: nil)
        }
        if !withheld.isEmpty { ends.record([.filtered: withheld.count]) }
        for (recipient, reason) in withheld {
            try await report(
                PushResult(of: recipient, jobID: job.id, app: appName, outcome: .filtered, reason: reason, attempts: 0),
                of: job, to: replyTo, ends: ends)
            metrics.notification(app: appName, platform: recipient.platform, outcome: .filtered, reason: reason)
        }
        // Devices go to APNs in batches of the slots free now (at least one, at most
        // `batchSize`): a batch never waits to fill up while devices could already go, and a
        // notification costs no task switch of its own on the way to APNs. Each device then
        // gets a task for its result (and any retries), which holds its slot until its result
        // is confirmed. Children report into one tally and are discarded as they finish, so a
        // finished device holds no memory while the rest of the job waits for slots.
        var stoppedAt: Int?
        // Only a job with Android devices has an FCM message to keep.
        let fcmMessage = recipients.contains { $0.platform == .fcm } ? FCMJobMessage(job) : nil
        try await withThrowingDiscardingTaskGroup { group in
            var next = recipients.startIndex
            while next < recipients.endIndex {
                if let cancelled, await cancelled() {
                    stoppedAt = next
                    break
                }
                let slots = await admission.admit(upTo: min(Self.batchSize, recipients.endIndex - next), lane: lane)
                // A device whose result could not be published failed the group: send no more of
                // a job that goes back to the queue (the slots go back with `slots`).
                guard !group.isCancelled else { break }
                // Its connection gone, the job comes again (here or to another worker): the
                // devices in flight finish, no more are sent.
                guard isCurrent() else { throw DeliveryLost() }
                let batch = recipients[next..<(next + slots.count)]
                next += slots.count
                group.addTask { [badgeCounts] in
                    try await self.deliver(job, to: batch, fcmMessage: fcmMessage, slots: slots, badges: badgeCounts, replyTo: replyTo, ends: ends)
                }
            }
        }
        if let stoppedAt {
            let rest = recipients[stoppedAt...]
            ends.record([.cancelled: rest.count])
            for recipient in rest {
                try await report(
                    PushResult(of: recipient, jobID: job.id, app: appName, outcome: .cancelled, reason: "cancelled", attempts: 0),
                    of: job, to: replyTo, ends: ends)
                metrics.notification(app: appName, platform: recipient.platform, outcome: .cancelled, reason: nil)
            }
            logger.notice("job cancelled: its devices not yet sent are not sent", metadata: [
                "job": "\(job.id)", "chunk": "\(chunk ?? "-")", "cancelled": "\(rest.count)", "devices": "\(devices)",
            ])
        }
        let summary = try await summarize(job, devices: devices, ends: ends, start: start, replyTo: replyTo, chunk: chunk, error: error, deferred: deferred)
        logger.info("job done", metadata: [
            "job": "\(job.id)", "app": "\(appName)", "devices": "\(devices)",
            "outcomes": "\(Outcome.allCases.compactMap { outcome in summary.outcomes[outcome].map { "\(outcome.rawValue)=\($0)" } }.joined(separator: ","))",
            "duration_ms": "\(summary.durationMilliseconds)", "retrying": "\(summary.retrying)",
        ])
        return Report(summary: summary, handedOn: ends.handedOn)
    }

    /// A job's end, whatever its kind: the batch's last results (before the summary, so a
    /// producer that has the summary has them all), then the summary; a reply queue that
    /// vanished on the way is said once in the log.
    func summarize(
        _ job: PushJob, devices: Int, ends: DeviceEnds, start: ContinuousClock.Instant, replyTo: String, chunk: String?, error: JobError?,
        deferred: Int = 0
    ) async throws -> JobSummary {
        if let rest = ends.batch?.drain() { try await publish(rest, of: job, to: replyTo, ends: ends) }
        // Every result in the ledger before the summary goes (and so before the job is acknowledged).
        await ledger?.sync()
        var summary = JobSummary(
            jobID: job.id, app: appName, devices: devices, outcomes: ends.outcomes, error: error,
            durationMilliseconds: Int((ContinuousClock.now - start) / .milliseconds(1)))
        summary.chunk = chunk
        summary.retrying = ends.handedOn.count
        summary.deferred = deferred
        summary.removed = ends.removed.load(ordering: .relaxed)
        summary.fromLedger = ends.fromLedger.load(ordering: .relaxed)
        do {
            try await results.publish(summary, to: replyTo)
        } catch let error as AMQPError where error.kind == .returned {
            ends.unroutable.add(1, ordering: .relaxed)
        }
        let unroutable = ends.unroutable.load(ordering: .relaxed)
        if unroutable > 0 {
            // Sending the job again would push its devices twice; its results have nowhere to go.
            logger.warning("the reply queue vanished during the job; its results were dropped, its devices are not sent again", metadata: [
                "job": "\(job.id)", "reply_to": "\(replyTo)", "dropped": "\(unroutable)",
            ])
        }
        return summary
    }

    /// The most devices handed to APNs at once: large enough that the per-batch costs vanish
    /// per device, small enough that a batch's answers come back while the next is out.
    static let batchSize = 64

    /// The reason of a device its user's quiet hours kept a job from (`quiet_hours: drop`).
    public static let quietHours = "quiet_hours"
    /// The reason of a device whose user reached a frequency cap of the job's type.
    public static let frequencyCap = "frequency_cap"

    /// The reason of a device a counted badge could not be sent to: it is not registered.
    public static let badgeNeedsRegistration = "badge_needs_registration"

    /// A batch of devices, each holding one of `slots`: their first attempt goes out together,
    /// and each device goes on alone (its result, its retries, giving its slot back) from its
    /// first answer, as the answers come.
    private func deliver(
        _ job: PushJob, to batch: ArraySlice<Recipient>, fcmMessage: FCMJobMessage?, slots: DeviceAdmission.Slots, badges: [String: Int], replyTo: String,
        ends: DeviceEnds
    ) async throws {
        guard let fcmMessage, batch.contains(where: { $0.platform == .fcm }) else {
            return try await deliverAPNs(job, to: batch, slots: slots, badges: badges, replyTo: replyTo, ends: ends)
        }
        let apple = ArraySlice(batch.filter { $0.platform == .apns })
        let android = batch.filter { $0.platform == .fcm }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await self.deliverFCM(job, to: android, message: fcmMessage, slots: slots, replyTo: replyTo, ends: ends) }
            if !apple.isEmpty { try await self.deliverAPNs(job, to: apple, slots: slots, badges: badges, replyTo: replyTo, ends: ends) }
        }
    }

    /// A batch's APNs devices.
    private func deliverAPNs(
        _ job: PushJob, to batch: ArraySlice<Recipient>, slots: DeviceAdmission.Slots, badges: [String: Int], replyTo: String, ends: DeviceEnds
    ) async throws {
        let requests = batch.map { request(job, to: $0, badge: badges[$0.token]) }
        try await withThrowingDiscardingTaskGroup { group in
            /// `firstAnswer` nil: not sent (past the job's expiration, which the device finds).
            func goOn(_ offset: Int, firstAnswer: Result<APNsResponse, APNsClientError>?) {
                let recipient = batch[batch.startIndex + offset]
                group.addTask {
                    let slot = SlotRelease(slots)
                    defer { slot.releaseUnlessHandedOver() }
                    let end = try await self.deliver(
                        job, to: recipient, request: requests[offset], badge: badges[recipient.token], firstAnswer: firstAnswer, replyTo: replyTo,
                        ends: ends, slot: slot)
                    ends.record(end)
                }
            }
            if job.expiration?.hasPassed() == true {
                for offset in requests.indices { goOn(offset, firstAnswer: nil) }
            } else {
                await client.send(requests) { answers in
                    for (offset, answer) in answers { goOn(offset, firstAnswer: answer) }
                }
            }
        }
    }

    /// - Parameter badge: the device's count, for a job that counts badges.
    private func request(_ job: PushJob, to recipient: Recipient, badge: Int?) -> APNsRequest {
        APNsRequest(
            deviceToken: recipient.token, topic: job.topic ?? topic, pushType: job.pushType, priority: job.priority,
            expiration: job.expiration, collapseID: job.collapseID, payload: badge.flatMap { job.badge?.payload(count: $0) } ?? job.payload)
    }

    /// One device: its first answer, then in-process retries, then publish its result, or hand
    /// it on when it still fails transiently and attempts remain beyond this worker's share.
    /// `DeviceStep` decides which; this carries it out.
    /// `firstAnswer`: APNs' answer to the device's first attempt, made with its batch; nil when
    /// the batch was not sent (past the expiration).
    private func deliver(
        _ job: PushJob, to recipient: Recipient, request: APNsRequest, badge: Int?, firstAnswer: Result<APNsResponse, APNsClientError>?,
        replyTo: String, ends: DeviceEnds, slot: SlotRelease
    ) async throws -> DeviceEnd {
        var result = PushResult(
            jobID: job.id, token: recipient.token, user: recipient.user, app: appName, outcome: .failed,
            attempts: recipient.previousAttempts)
        let (step, answer, reasonLabel) = try await attempt(
            request, of: job, result: &result, firstAnswer: firstAnswer, previousAttempts: recipient.previousAttempts, policy: retry,
            subject: ["token": "\(recipient.token.prefix(8))…"])
        switch step {
        case .handOn:
            return .handOn(Recipient(token: recipient.token, user: recipient.user, previousAttempts: result.attempts, badge: badge))
        case .finish(_, let deadDevice):
            if let deadDevice, let feedback, let answer,
                await feedback.deviceRejected(app: job.registryApp, token: recipient.token, reason: deadDevice, at: try? answer.get().timestamp)
            {
                ends.removed.add(1, ordering: .relaxed)
            }
        case .retry:
            break  // `attempt` retries until another step
        }
        logger.debug("device done", metadata: [
            "job": "\(job.id)", "token": "\(recipient.token.prefix(8))…", "outcome": "\(result.outcome.rawValue)",
            "status": "\(result.status.map(String.init) ?? "-")", "reason": "\(result.reason ?? "-")", "attempts": "\(result.attempts)",
        ])
        try await report(result, of: job, to: replyTo, ends: ends, slot: slot)
        // Counted once its result is confirmed (`all`, `failures`), so the counter and the results a
        // producer reads agree; with `batched` once it is in the batch, which is confirmed before the summary.
        metrics.notification(app: appName, outcome: result.outcome, reason: reasonLabel)
        return .final(result.outcome)
    }

    /// The attempts of one request, a device's or a broadcast's: its first answer (when its batch
    /// brought one), then in-process retries with backoff as `DeviceStep` decides, until a final
    /// outcome (recorded in `result`), a hand-on, or the job's expiration (`expired`, nothing sent).
    /// Returns the last step, the answer it was taken on (nil when expired) and the reason's label
    /// for the metrics (APNs' reason, or the kind of error: few values, unlike `result.reason`).
    func attempt(
        _ request: APNsRequest, of job: PushJob, result: inout PushResult, firstAnswer: Result<APNsResponse, APNsClientError>?,
        previousAttempts: Int, policy: RetryPolicy, subject: Logger.Metadata
    ) async throws -> (step: DeviceStep, answer: Result<APNsResponse, APNsClientError>?, reasonLabel: String?) {
        var firstAnswer = firstAnswer
        var reasonLabel: String?
        while true {
            if firstAnswer == nil, let expiration = job.expiration, expiration.hasPassed() {
                result.outcome = .expired
                return (.finish(.expired), nil, reasonLabel)
            }
            result.attempts += 1
            let answer: Result<APNsResponse, APNsClientError>
            if let first = firstAnswer {
                firstAnswer = nil
                answer = first
            } else {
                answer = await client.send([request])[0]
            }
            reasonLabel = result.record(answer)
            let step = DeviceStep.after(answer, attempts: result.attempts, previousAttempts: previousAttempts, policy: policy)
            switch step {
            case .finish(let outcome, _):
                result.outcome = outcome
                return (step, answer, reasonLabel)
            case .handOn:
                return (step, answer, reasonLabel)
            case .retry:
                logger.debug("retrying", metadata: subject.merging(["job": "\(job.id)", "attempt": "\(result.attempts)"]) { $1 })
                try await Task.sleep(for: retry.delay(afterAttempt: result.attempts))
            }
        }
    }

    /// A device's final result, as the job's `results` asks: published alone (`all`, and
    /// `failures` for a device not delivered), added to the batch (`batched`, published when
    /// full), or only counted (`none`); and its record handed to the ledger.
    ///
    /// The record is handed over once the result is confirmed (`all`, `failures`), or at once
    /// when the result waits in a batch (it then names the batch's message, until the message is
    /// marked confirmed) or has nothing to wait for. So a record is written when the device's
    /// outcome is final, whatever its result message waits for.
    /// - Parameter slot: the device's admission slot. With a ledger, it is given back once the
    ///   device's record is written (one commit shared by the devices finishing meanwhile), not
    ///   when the device's task ends: a device sent and not yet in the ledger always holds a slot,
    ///   so a worker lost at any moment repeats at most the app's `max_in_flight` devices when its
    ///   job comes back, in every results mode.
    func report(_ result: PushResult, of job: PushJob, to replyTo: String, ends: DeviceEnds, slot: SlotRelease? = nil) async throws {
        var routed = Routed.kept
        var failure: (any Error)?
        do {
            routed = try await route(result, of: job, to: replyTo, ends: ends)
        } catch {
            failure = error
        }
        if let ledger {
            // A result the broker did not take names a message that nobody will mark: the job,
            // which goes back to the queue, publishes it from the ledger rather than push again.
            let waitsIn: Int64? = if failure != nil { ResultBatch.newID() } else if case .batched(let message, _) = routed { message } else { nil }
            let record = result.ledgerRecord(chunk: ends.chunk, message: waitsIn)
            if let slot {
                slot.handOver()
                await ledger.append(record, othersWait: slot.othersWait, whenWritten: { slot.release() })
            } else {
                await ledger.append([record])
            }
        }
        if let failure { throw failure }
        if case .batched(_, let full?) = routed { try await publish(full, of: job, to: replyTo, ends: ends) }
    }

    /// Where a device's result went, as the job's `results` asks.
    enum Routed {
        /// Published alone and confirmed (`all`, and `failures` for a device not delivered).
        case published
        /// Into the batch's message `message`; `full` when it filled it, for the caller to publish.
        case batched(message: Int64, full: ResultBatch.Message?)
        /// Only counted (`failures` for a delivered device, `none`).
        case kept
    }

    private func route(_ result: PushResult, of job: PushJob, to replyTo: String, ends: DeviceEnds, answering: Bool = false) async throws -> Routed {
        switch job.results {
        case .all:
            try await publish(result, to: replyTo, ends: ends)
            return .published
        case .failures where result.outcome.isFailure:
            try await publish(result, to: replyTo, ends: ends)
            return .published
        case .batched:
            guard let added = ends.batch?.add(result, answering: answering) else { return .kept }
            return .batched(message: added.message, full: added.full)
        case .failures, .none:
            return .kept
        }
    }

    /// The devices of a job that came back whose records the ledger holds while no reply for
    /// them was confirmed (their results message was not marked, or their result never reached
    /// the broker): their result is published again from the record, as the job's `results`
    /// asks, with no push and no second record, and once confirmed the record says so. Results
    /// stay at least once.
    func answerFromLedger(_ held: some Sequence<DeliveryRecord>, of job: PushJob, to replyTo: String, ends: DeviceEnds) async throws {
        var alone: [String] = []
        for record in held where record.resultsMessage != nil {
            switch try await route(PushResult(record), of: job, to: replyTo, ends: ends, answering: true) {
            case .published:
                alone.append(record.token)
            case .batched(_, let full):
                if let full { try await publish(full, of: job, to: replyTo, ends: ends) }
            case .kept:
                continue
            }
            ends.fromLedger.add(1, ordering: .relaxed)
        }
        if !alone.isEmpty { await ledger?.confirm(job: job.id, app: appName, messages: [], answered: alone) }
    }

    /// A result the broker returns (its reply queue was deleted after the job's check) is
    /// counted, not thrown: throwing would requeue the job and send its devices again.
    private func publish(_ result: PushResult, to replyTo: String, ends: DeviceEnds) async throws {
        do {
            try await results.publish(result, to: replyTo)
        } catch let error as AMQPError where error.kind == .returned {
            ends.unroutable.add(1, ordering: .relaxed)
        }
    }

    /// A full batch, or the last of a job; once the broker has it (or returned it: its reply
    /// queue is gone, and publishing it again would not help), it is marked confirmed in the
    /// ledger, and so are the results it published again from there.
    private func publish(_ batch: ResultBatch.Message, of job: PushJob, to replyTo: String, ends: DeviceEnds) async throws {
        do {
            try await results.publish(batch, jobID: job.id, to: replyTo)
        } catch let error as AMQPError where error.kind == .returned {
            ends.unroutable.add(batch.count, ordering: .relaxed)
        }
        await ledger?.confirm(job: job.id, app: appName, messages: [batch.id], answered: batch.answers)
    }
}
