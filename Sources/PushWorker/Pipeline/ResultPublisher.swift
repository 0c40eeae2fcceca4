import AMQP
import Foundation

/// Publishes results and summaries, persistent and confirmed, with `correlation_id` = job id.
public struct ResultPublisher: Sendable {
    private let publisher: any MessagePublishing

    /// About half a minute of retries, 100 ms doubling to 2 s, for a broker that is briefly away.
    static let outage = RetryPolicy(maxAttempts: 20, initialDelay: .milliseconds(100), maximumDelay: .seconds(2))

    /// A nack is the broker not taking the message now (a quorum queue between leaders); a few
    /// more tries, about 3 s, before the job goes back to the queue.
    static let nackAttempts = 5

    public init(publisher: any MessagePublishing) {
        self.publisher = publisher
    }

    public func publish(_ result: PushResult, to queue: String) async throws {
        try await publish(result.json, type: "result", jobID: result.jobID, to: queue)
    }

    /// A `results: batched` job's packed results (`ResultBatch`), `type` = `results`.
    func publish(_ batch: ResultBatch.Message, jobID: String, to queue: String) async throws {
        try await publish(batch.body, type: "results", jobID: jobID, to: queue)
    }

    public func publish(_ summary: JobSummary, to queue: String) async throws {
        try await publish(summary.json, type: "summary", jobID: summary.jobID, to: queue)
    }

    /// Publishes again while the broker is briefly away (a restart, a lost connection, a nack), so
    /// a blip does not throw away the work of a whole job; gives up after about half a minute.
    private func publish(_ body: [UInt8], type: String, jobID: String, to queue: String) async throws {
        let properties = AMQPProperties(
            contentType: "application/json", persistent: true, correlationID: jobID,
            timestamp: UInt64(Date().timeIntervalSince1970), type: type)
        // Mandatory: a reply queue that does not exist is an error, not a silent loss.
        let message = AMQPMessage.toQueue(queue, body: body, properties: properties, mandatory: true)
        for attempt in 1... {
            do {
                return try await publisher.publish(message)
            } catch let error as AMQPError
                where (error.isRetryable && error.kind != .brokerClosed || error.kind == .nacked && attempt < Self.nackAttempts) && attempt < Self.outage.maxAttempts
            {
                try await Task.sleep(for: Self.outage.delay(afterAttempt: attempt))
            }
        }
    }
}
