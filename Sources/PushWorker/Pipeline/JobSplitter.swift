import AMQP
import Logging

/// Republishes a large job as chunk jobs on the bulk lane's queue, so every worker can take a share
/// and the jobs queue stays free for small jobs.
/// Chunks are made from the resolved audience as its pages arrive, each carrying its devices as
/// `(token, user)` pairs (and those preferences filtered), so no worker resolves them again and a
/// million-device group is never held whole. All chunks are confirmed before the original is
/// acknowledged; a crash in between only repeats chunks.
struct JobSplitter: Sendable {
    let publisher: any MessagePublishing
    /// Where the chunks go: the bulk lane's queue of the job's app.
    let queues: WorkerSettings.Names
    let chunkSize: Int
    let logger: Logger

    /// Chunks published and not yet confirmed, at most: bounds the bodies in memory.
    static let chunksInFlight = 8

    func split(_ job: PushJob, _ audience: any AudienceStream, from delivery: JobDelivery) async throws {
        let size = max(1, chunkSize)
        let chunksQueue = queues.bulkJobs(app: job.app)
        let count = (audience.count + size - 1) / size
        var published = 0
        var devices = 0
        try await withThrowingTaskGroup(of: Void.self) { group in
            var chunk = AudiencePage()
            func publish(_ chunk: AudiencePage) throws {
                let properties = delivery.properties.republished(messageID: "\(job.id)#\(published + 1)") { headers in
                    headers[WireHeader.chunk] = .string("\(published + 1)/\(count)")
                    delivery.markRepeat(&headers)
                    headers[WireHeader.enqueuedAt] = .int64(WireHeader.nowMilliseconds())
                }
                let message = AMQPMessage.toQueue(chunksQueue, body: try job.chunkBody(devices: chunk.recipients, filtered: chunk.filtered), properties: properties)
                group.addTask { try await publisher.publish(message) }
                published += 1
                devices += chunk.count
            }
            try await audience.forEachPage { page in
                // Fill the chunk from the page: its recipients, then its filtered devices.
                var recipients = page.recipients[...], filtered = page.filtered[...]
                while !recipients.isEmpty || !filtered.isEmpty {
                    let fromRecipients = recipients.prefix(size - chunk.count)
                    chunk.recipients += fromRecipients
                    recipients = recipients.dropFirst(fromRecipients.count)
                    let fromFiltered = filtered.prefix(size - chunk.count)
                    chunk.filtered += fromFiltered
                    filtered = filtered.dropFirst(fromFiltered.count)
                    if chunk.count == size {
                        if published >= Self.chunksInFlight { try await group.next() }
                        try publish(chunk)
                        chunk = AudiencePage()
                        chunk.recipients.reserveCapacity(size)
                    }
                }
            }
            if chunk.count > 0 { try publish(chunk) }
            try await group.waitForAll()
        }
        if published != count {
            // The audience changed between its count and its pages: a store without snapshots.
            logger.error("a split job's chunk count changed while it was read; its chunk labels are off", metadata: [
                "job": "\(job.id)", "counted": "\(audience.count)", "devices": "\(devices)", "chunks": "\(published)",
            ])
        }
        logger.info("job split into chunks", metadata: ["job": "\(job.id)", "devices": "\(devices)", "chunks": "\(published)"])
    }

}
