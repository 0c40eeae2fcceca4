import AMQP
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// An installation from before results and retry queues were quorum, upgraded: the worker
/// refuses to start naming the fix, and `pushworker queues migrate` brings the queues to the
/// configured type with every message kept.
@Suite("pushworker queues", .usesBroker)
struct QueuesCommandTests {
    @Test("a classic results queue and retry queue with messages: the worker refuses naming `queues migrate`; migrate keeps every message, in order, with its headers; then the worker starts")
    func migratesClassicToQuorum() async throws {
        let fixture = try await MockAPNsFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let prefix = TestBroker.uniqueName("migrate")
        // A retry delay of an hour: its queue's messages expire after it, and a machine busy with
        // the whole suite once took more than a minute to come to the migration.
        let results = "\(prefix).results", retry = "\(prefix).jobs.retry.3600000ms"
        let config = try MockAPNsFixture.writeConfiguration("""
            amqp: {url: "\(TestBroker.url)"}
            retry_delays_ms: [3600000]
            queues: {exchange: \(prefix).push, jobs: \(prefix).jobs, dead_letter_exchange: \(prefix).dlx, dead_letters: \(prefix).dead, results: \(results)}
            apps:
            \(fixture.appYAML())
            """, quorumQueues: true)
        // The queues as pushworker 0.4 declared them: classic.
        let old = AMQPTopology(
            exchanges: [.init("\(prefix).push")],
            queues: [
                .durable(results),
                .durable(retry, deadLetterExchange: "\(prefix).push", deadLetterRoutingKey: "jobs", messageTTL: .seconds(3600)),
            ])
        let publisher = try await TestBroker.publisher(topology: old)
        try await publisher.publish(contentsOf: (0..<2000).map { index in
            let headers: AMQPTable = ["index": .int64(Int64(index))]
            return .toQueue(results, body: Array("result \(index)".utf8), properties: AMQPProperties(headers: headers, persistent: true, messageID: "r\(index)"))
        })
        for index in 0..<30 {
            try await publisher.publish(.toQueue(retry, body: Array("retry \(index)".utf8), properties: AMQPProperties(persistent: true, messageID: "j\(index)")))
        }

        let refused = try await Program.running(["run", "--config", config.path], killAfter: .seconds(60))
        #expect(refused.status != 0)
        #expect(refused.standardError.contains("queues migrate --config \(config.path)"), "\(refused.standardError)")
        #expect(refused.standardError.contains("x-queue-type"), "\(refused.standardError)")

        let check = try await Program.running(["queues", "check", "--config", config.path])
        #expect(check.status == 1)
        #expect(check.standardOutput.contains("\(results): DIFFERS, 2000 message(s)"), "\(check.standardOutput)\(check.standardError)")
        #expect(check.standardOutput.contains("\(retry): DIFFERS, 30 message(s)"), "\(check.standardOutput)")
        // Declared by the worker before it came to the results queue, and as configured.
        #expect(check.standardOutput.contains("\(prefix).jobs: as configured"), "\(check.standardOutput)")

        // A consumer still reading the results: nothing is touched.
        let reader = try await TestBroker.consumer(queue: results, prefetch: 1)
        let busy = try await Program.running(["queues", "migrate", "--config", config.path])
        #expect(busy.status != 0)
        #expect(busy.standardError.contains("\(results) has 1 consumer(s)"), "\(busy.standardError)")
        await reader.close()
        #expect(try await publisher.perform(.inspect(results))?.messages == 2000)

        let migrate = try await Program.running(["queues", "migrate", "--config", config.path])
        #expect(migrate.status == 0, "\(migrate.standardError)")
        #expect(migrate.standardOutput.contains("\(results): declared as configured"), "\(migrate.standardOutput)")
        #expect(migrate.standardOutput.contains("2000 message(s) moved out and 2000 back"), "\(migrate.standardOutput)")
        #expect(migrate.standardOutput.contains("30 message(s) moved out and 30 back"), "\(migrate.standardOutput)")
        let again = try await Program.running(["queues", "check", "--config", config.path])
        #expect(again.status == 0, "\(again.standardOutput)")
        #expect(try await publisher.perform(.inspect("\(results).migrating")) == nil)
        #expect(try await publisher.perform(.inspect(retry))?.messages == 30)

        // Quorum now: declaring it as the worker does is accepted. Each message is there once:
        // none moved twice because an ack was lost when a consumer closed.
        try await publisher.perform(.declare(.durable(results, quorum: true)))
        #expect(try await publisher.perform(.inspect(results))?.messages == 2000)
        let consumer = try await TestBroker.consumer(queue: results, prefetch: 500)
        for index in 0..<2000 {
            let delivery = try await consumer.next()
            #expect(delivery.properties.messageID == "r\(index)")
            #expect(delivery.properties.headers?["index"]?.intValue == Int64(index))
            #expect(delivery.body == Array("result \(index)".utf8))
            try await delivery.ack()
        }
        await consumer.close()

        let worker = try RunningProgram.worker(config: config)
        try await worker.waitForLog("worker started")
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await publisher.close()
    }
}
