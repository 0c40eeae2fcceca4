import AMQP
import Foundation
import MockAPNs
import PushWorker
import Stores
import TestSupport
import Testing

/// Scheduled jobs against the real broker, a running worker and MockAPNs, as a producer and an
/// operator use them: held in the store across a worker's SIGKILL, released by the next worker at
/// their time, cancelled over the queue and from the command line.
@Suite("Scheduled jobs", .usesBroker)
struct ScheduleWorkerTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0x5CED) }

    static func job(_ id: String, sendAt: Date, tokens: [Int], extra: String = "") -> String {
        let at = JobScheduler.rfc3339(Int64(sendAt.timeIntervalSince1970 * 1000))
        return #"{"id": "\#(id)", "send_at": "\#(at)", "audience": {"tokens": [\#(tokens.map { "\"\(token($0))\"" }.joined(separator: ","))]}, "payload": {"aps": {"alert": "later"}}\#(extra)}"#
    }

    @Test("held across a worker's SIGKILL and released by the next at its time, each device once; cancelled over the queue and with pushworker schedule; an unknown or released job is answered so",
          arguments: [RegistryWorkerTests.Kind.sqlite, .postgres])
    func scheduled(_ kind: RegistryWorkerTests.Kind) async throws {
        let (_, registry) = try await kind.make()
        let running = try await RegistryWorkerTests.Running.start(registry: registry)
        // Far enough ahead that a worker on a loaded machine holds the jobs before their time
        // (one taken late is sent at once, and the test could not see it held).
        let sendAt = Date().addingTimeInterval(30)
        let base = running.base
        try await base.publish(Self.job("at-30s", sendAt: sendAt, tokens: [1, 2]))
        // Cancelled after the first worker's SIGKILL and the next one's start: its time is far
        // enough ahead that a machine busy enough to take 30 s over those still finds it waiting.
        try await base.publish(Self.job("to-cancel", sendAt: Date().addingTimeInterval(600), tokens: [3], extra: #", "idempotency_key": "promo-9""#))
        try await base.publish(Self.job("next-hour", sendAt: Date().addingTimeInterval(3600), tokens: [4]))
        var scheduled: [String: String] = [:]
        while scheduled.count < 3 {
            let reply = try await JobContractTests.Running.reply(from: running.results)
            let summary = try #require(reply.summary, "only summaries before the send_at: \(String(decoding: reply.delivery.body, as: UTF8.self))")
            scheduled[summary.jobID] = summary.scheduledFor
        }
        #expect(scheduled["at-30s"] == JobScheduler.rfc3339(Int64(sendAt.timeIntervalSince1970 * 1000)))
        #expect(base.mock.requestCount == 0)

        // The worker dies; the jobs are in the store, not in its memory. The next one releases them.
        #expect(try await running.worker.stop(signal: SIGKILL) == SIGKILL)
        let next = try RunningProgram.worker(config: running.setup.config)
        try await next.waitForLog("worker started")

        let cancelled = try await running.send(#"{"command": "cancel_job", "idempotency_key": "promo-9"}"#, id: "cancel-1")
        #expect(cancelled["ok"] as? Bool == true && (cancelled["cancelled"] as? [String: Any])?["job_id"] as? String == "to-cancel", "\(cancelled)")
        let unknown = try await running.send(#"{"command": "cancel_job", "job": "nope"}"#, id: "cancel-2")
        #expect((unknown["error"] as? [String: Any])?["code"] as? String == "unknown_job", "\(unknown)")
        let config = ["--config", running.setup.config.path]
        let listed = try await Program.running(["schedule", "list"] + config, killAfter: .seconds(120))
        #expect(listed.status == 0 && listed.standardOutput.contains("next-hour") && !listed.standardOutput.contains("to-cancel"), "\(listed.standardOutput)\(listed.standardError)")

        var delivered: Set<String> = []
        while delivered.count < 2 {
            // Nothing comes until the send_at, up to 30 s from the publish: a wait for it, not a deadline on the work.
            let delivery = try await JobContractTests.Running.next(from: running.results, within: .seconds(90))
            guard delivery.properties.type != "summary" else { continue }
            if let result = try? JSONDecoder().decode(PushResult.self, from: Data(delivery.body)) {
                #expect(result.jobID == "at-30s" && result.outcome == .delivered)
                #expect(Date() >= sendAt, "not before its send_at")
                delivered.insert(result.token)
            }
        }
        #expect(delivered == [Self.token(1), Self.token(2)])
        let summary = try #require(try await JobContractTests.Running.reply(from: running.results).summary)
        #expect(summary.jobID == "at-30s" && summary.outcomes == [.delivered: 2])
        #expect(base.mock.deliveryCounts == [Self.token(1): 1, Self.token(2): 1], "the cancelled job's device was never pushed")

        let cancel = try await Program.running(["schedule", "cancel", "next-hour"] + config, killAfter: .seconds(120))
        #expect(cancel.status == 0 && cancel.standardOutput.contains("cancelled demo/next-hour"), "\(cancel.standardOutput)\(cancel.standardError)")
        let late = try await Program.running(["schedule", "cancel", "at-30s"] + config, killAfter: .seconds(120))
        #expect(late.status != 0 && late.standardError.contains("job 'at-30s' was released"), "\(late.standardError)")
        let shown = try await Program.running(["schedule", "show", "--key", "promo-9"] + config, killAfter: .seconds(120))
        #expect(shown.standardOutput.contains(#""state":"cancelled""#) && shown.standardOutput.contains(#""alert":"later""#), "\(shown.standardOutput)")
        let all = try await Program.running(["schedule", "list", "--all", "--json"] + config, killAfter: .seconds(120))
        let jobs = try #require(try JSONSerialization.jsonObject(with: Data(all.standardOutput.utf8)) as? [[String: Any]])
        #expect(Dictionary(uniqueKeysWithValues: jobs.map { ($0["job_id"] as? String ?? "", $0["state"] as? String ?? "") })
            == ["at-30s": "released", "to-cancel": "cancelled", "next-hour": "cancelled"])

        #expect(try await next.stop() == 0, "\(next.log)")
        await running.close()
    }

    @Test("a job released at its time goes out beside a backlog of jobs still to be held, not behind it")
    func releaseBesideBacklog() async throws {
        let (_, registry) = try await RegistryWorkerTests.Kind.sqlite.make()
        let running = try await RegistryWorkerTests.Running.start(registry: registry)
        let base = running.base
        let sendAt = Date().addingTimeInterval(20)
        try await base.publish(Self.job("due", sendAt: sendAt, tokens: [1]))
        let held = try #require(try await JobContractTests.Running.reply(from: running.results).summary)
        #expect(held.jobID == "due" && held.scheduledFor != nil)
        // With the worker away, a backlog of jobs to hold fills the jobs queue, and the due job's
        // time passes. The next worker releases it while the backlog is still being held: on the
        // jobs queue it would wait behind all of them.
        #expect(try await running.worker.stop() == 0)
        let backlog = 1_000
        for index in 0..<backlog {
            try await base.publish(Self.job("later-\(index)", sendAt: Date().addingTimeInterval(7_200), tokens: [2]))
        }
        while Date() < sendAt { try await Task.sleep(for: .milliseconds(200)) }
        let next = try RunningProgram.worker(config: running.setup.config)
        var heldBefore = 0, heldAll = 0, sent: JobSummary?
        while sent == nil || heldAll < backlog {
            let reply = try await JobContractTests.Running.reply(from: running.results)
            guard let summary = reply.summary else { continue }
            if summary.jobID == "due" {
                sent = summary
                heldBefore = heldAll
            } else {
                #expect(summary.scheduledFor != nil, "\(summary.jobID) held")
                heldAll += 1
            }
        }
        #expect(sent?.outcomes == [.delivered: 1])
        // Behind the backlog, all of it (less the now lane's prefetch) would be held first.
        #expect(heldBefore < backlog / 2, "the released job waited behind \(heldBefore) of the \(backlog) jobs to hold")
        #expect(base.mock.deliveryCounts == [Self.token(1): 1])

        #expect(try await next.stop() == 0, "\(next.log)")
        await running.close()
    }
}
