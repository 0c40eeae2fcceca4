import AMQP
import Logging

/// Publishes the devices still failing after a worker's share of attempts as a retry job to the
/// delayed retry queue of the next round, confirmed, before the job is acknowledged. It comes back
/// to the jobs queue when its pause is over, as a chunk (never split again), with the attempts
/// made so far for each device.
struct RetryHandOff: Sendable {
    let publisher: any MessagePublishing
    let queues: WorkerSettings.Names
    /// Pauses of the successive rounds; the last repeats.
    let delaysMilliseconds: [Int]
    let metrics: WorkerMetrics
    let logger: Logger

    /// The chunk header of a retry job of a job sent whole (not split): it stays in the now lane.
    static let wholeJobChunk = "retry"

    /// One retry job per round the devices go to: the next, or a later one for a device FCM
    /// asked to wait longer (a quota answer), so the others do not wait with it.
    func handOn(_ job: PushJob, _ recipients: [Recipient], from delivery: JobDelivery) async throws {
        let previous = Int(delivery.properties.headers?[WireHeader.retryRound]?.intValue ?? 0)
        var byRound: [Int: (delay: Int, recipients: [Recipient])] = [:]
        for recipient in recipients {
            let (round, delay) = Self.round(after: previous, delays: delaysMilliseconds, notBefore: recipient.notBefore)
            byRound[round, default: (delay, [])].recipients.append(recipient)
        }
        for (round, group) in byRound.sorted(by: { $0.key < $1.key }) {
            try await publish(job, group.recipients, round: round, delay: group.delay, from: delivery)
        }
    }

    private func publish(_ job: PushJob, _ recipients: [Recipient], round: Int, delay: Int, from delivery: JobDelivery) async throws {
        let properties = delivery.properties.republished(messageID: "\(job.id)#retry\(round + 1)") { headers in
            headers[WireHeader.chunk] = headers[WireHeader.chunk] ?? .string(Self.wholeJobChunk)
            delivery.markRepeat(&headers)
            headers[WireHeader.enqueuedAt] = nil  // its pause is no queue wait; moved to the bulk lane, it gets a new one
            headers[WireHeader.attempts] = .array(recipients.map { .int64(Int64($0.previousAttempts)) })
            headers[WireHeader.badges] = job.badge == nil ? nil : .array(recipients.map { .int64(Int64($0.badge ?? -1)) })
            headers[WireHeader.retryRound] = .int64(Int64(round + 1))
        }
        try await publisher.publish(.toQueue(
            queues.retryQueue(milliseconds: delay), body: try job.chunkBody(devices: recipients), properties: properties))
        metrics.retriesHandedOn(app: job.app, devices: recipients.count)
        logger.info("devices handed on to a retry job", metadata: ["job": "\(job.id)", "devices": "\(recipients.count)", "delay_ms": "\(delay)"])
    }

    /// The round a retry job goes to after `previous` rounds, and its pause: the next one, or the
    /// first after it whose pause is at least `notBefore` (FCM's Retry-After, a minute after a
    /// quota error), else the longest (`retry_delays_ms` with none that long: sooner than asked).
    static func round(after previous: Int, delays: [Int], notBefore: Duration?) -> (round: Int, delayMilliseconds: Int) {
        let last = delays.count - 1
        var round = min(previous, last)
        if let notBefore {
            let wanted = notBefore.components.seconds * 1000 + notBefore.components.attoseconds / 1_000_000_000_000_000
            while round < last, Int64(delays[round]) < wanted { round += 1 }
        }
        return (max(round, previous), delays[round])
    }

    /// The sends already made to each device of a retry job, from its attempts header (in the
    /// order of its devices; of its tokens for a retry job of an older worker).
    static func previousAttempts(of job: PushJob, _ delivery: JobDelivery) -> [String: Int] {
        perDevice(WireHeader.attempts, of: job, delivery)
    }

    /// The badge counts earlier rounds gave the devices of a retry job.
    static func badges(of job: PushJob, _ delivery: JobDelivery) -> [String: Int] {
        perDevice(WireHeader.badges, of: job, delivery).filter { $0.value >= 0 }
    }

    private static func perDevice(_ header: String, of job: PushJob, _ delivery: JobDelivery) -> [String: Int] {
        guard let counts = delivery.properties.headers?[header]?.arrayValue else { return [:] }
        var attempts: [String: Int] = [:]
        let tokens = job.audience.isResolved ? job.audience.devices.map(\.token) : job.audience.tokens
        for (token, count) in zip(tokens, counts) {
            if let value = count.intValue { attempts[token] = Int(value) }
        }
        return attempts
    }
}
