import AMQP
import Logging

/// Republishes a large job as chunk jobs on the jobs queue, so every worker can take a share.
/// All chunks are confirmed before the original is acknowledged; a crash in between only repeats
/// chunks. Chunk bodies are made as they go out, a few confirms at a time, so a million-device job
/// never has all its chunks in memory at once.
struct JobSplitter: Sendable {
    let publisher: any MessagePublishing
    let jobsQueue: String
    let chunkSize: Int
    let logger: Logger

    static let chunksInFlight = 32

    /// - Parameter tokens: the devices of chunk range `range`, in order, each once.
    func split(_ job: PushJob, devices: Int, from delivery: JobDelivery, tokens: (Range<Int>) -> [String]) async throws {
        let size = max(1, chunkSize)
        let count = (devices + size - 1) / size
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                if index >= Self.chunksInFlight { try await group.next() }
                var properties = delivery.properties
                var headers = Self.ownHeaders(properties.headers)
                headers[WireHeader.chunk] = .string("\(index + 1)/\(count)")
                properties.headers = headers
                properties.persistent = true
                properties.messageID = "\(job.id)#\(index + 1)"
                let body = try job.chunkBody(tokens: tokens((index * size)..<min(devices, (index + 1) * size)))
                let message = AMQPMessage.toQueue(jobsQueue, body: body, properties: properties)
                group.addTask { try await publisher.publish(message) }
            }
            try await group.waitForAll()
        }
        logger.info("job split into chunks", metadata: ["job": "\(job.id)", "devices": "\(devices)", "chunks": "\(count)"])
    }

    /// The headers a republished job keeps: the producer's and ours, not the broker's bookkeeping.
    static func ownHeaders(_ headers: AMQPTable?) -> AMQPTable {
        (headers ?? [:]).filter { !WireHeader.brokerBookkeeping.contains($0.key) }
    }
}
