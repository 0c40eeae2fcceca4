import AMQP
import Foundation
import MockAPNs
import PushWorker
import Stores
import TestSupport
import Testing

/// `pushworker deliveries` against the ledger a running worker wrote, as an operator asks it.
@Suite("pushworker deliveries", .usesBroker)
struct DeliveriesCommandTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xDE11) }

    /// What `--json` prints.
    struct Page: Decodable {
        let deliveries: [DeliveryRecord]
        let next: String?
    }

    @Test("by job, user, token and idempotency key, newest first, as lines or JSON; --json and --after page to the end; a bad option names itself", arguments: [RegistryWorkerTests.Kind.sqlite, .postgres])
    func deliveries(_ kind: RegistryWorkerTests.Kind) async throws {
        let (_, registry) = try await kind.make()
        let running = try await RegistryWorkerTests.Running.start(registry: registry, faults: [MockAPNsFault(.reject(.unregistered), tokens: [Self.token(2)])])
        try await running.apply([#"{"command": "register_device", "app": "demo", "token": "\#(Self.token(1))", "user": "ada"}"#])
        let job = try await running.job(
            #"{"id": "ledger-1", "audience": {"tokens": ["\#(Self.token(1))", "\#(Self.token(2))"]}, "payload": {"aps": {"alert": "hi"}}}"#, devices: 2)
        #expect(job[Self.token(2)]?.outcome == .rejected)
        _ = try await running.results.next(within: .seconds(30)).ack()  // the summary
        let config = ["--config", running.setup.config.path]

        let byJob = try await Program.running(["deliveries"] + config + ["--job", "ledger-1"], killAfter: .seconds(120))
        #expect(byJob.status == 0, "\(byJob.standardError)")
        let lines = byJob.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(byJob.standardOutput)")
        #expect(lines.contains { $0.contains(Self.token(1)) && $0.contains("ada") && $0.contains("delivered") && $0.contains("200") }, "\(lines)")
        #expect(lines.contains { $0.contains(Self.token(2)) && $0.contains("rejected") && $0.contains("410") && $0.contains("Unregistered") }, "\(lines)")

        let byUser = try await Program.running(["deliveries"] + config + ["--user", "ada", "--json"], killAfter: .seconds(120))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(byUser.standardOutput.utf8)) as? [String: Any], "\(byUser.standardOutput)")
        #expect(object.keys.sorted() == ["deliveries", "next"] && object["next"] is NSNull, "next is null on the last page: \(byUser.standardOutput)")
        let records = try JSONDecoder().decode(Page.self, from: Data(byUser.standardOutput.utf8)).deliveries
        #expect(records.map(\.token) == [Self.token(1)] && records.first?.jobID == "ledger-1" && records.first?.apnsID != nil, "\(byUser.standardOutput)")

        let byToken = try await Program.running(["deliveries"] + config + ["--token", Self.token(2).uppercased(), "--since", "2020-01-01T00:00:00Z"], killAfter: .seconds(120))
        #expect(byToken.standardOutput.contains("ledger-1"), "\(byToken.standardOutput)\(byToken.standardError)")
        let none = try await Program.running(["deliveries"] + config + ["--token", Self.token(2), "--until", "1000"], killAfter: .seconds(120))
        #expect(none.status == 0 && none.standardOutput.isEmpty && none.standardError.contains("no deliveries found"))

        let bad = try await Program.running(["deliveries"] + config + ["--job", "x", "--since", "Tuesday"], killAfter: .seconds(120))
        #expect(bad.status != 0 && bad.standardError.contains("--since 'Tuesday'"), "\(bad.standardError)")
        let two = try await Program.running(["deliveries"] + config + ["--job", "x", "--user", "y"], killAfter: .seconds(120))
        #expect(two.status != 0 && two.standardError.contains("exactly one of --job, --user, --token and --key"), "\(two.standardError)")

        // A job with an idempotency key: found by the key alone, a page at a time.
        let keyed = (3..<8).map(Self.token)
        _ = try await running.job(#"{"id": "ledger-2", "idempotency_key": "order-2", "audience": {"tokens": [\#(keyed.map { "\"\($0)\"" }.joined(separator: ","))]}, "payload": {"aps": {"alert": "hi"}}}"#, devices: keyed.count)
        _ = try await running.results.next(within: .seconds(30)).ack()  // the summary
        let byKey = try await Program.running(["deliveries"] + config + ["--key", "order-2"], killAfter: .seconds(120))
        #expect(byKey.status == 0 && byKey.standardOutput.split(separator: "\n").count == keyed.count, "\(byKey.standardOutput)\(byKey.standardError)")
        #expect(byKey.standardOutput.split(separator: "\n").allSatisfy { $0.contains("ledger-2") } && !byKey.standardError.contains("--after"), "\(byKey.standardOutput)")
        let whole = try JSONDecoder().decode(
            Page.self, from: Data(try await Program.running(["deliveries"] + config + ["--job", "ledger-2", "--json"], killAfter: .seconds(120)).standardOutput.utf8))
        #expect(whole.deliveries.count == keyed.count && whole.next == nil)
        var paged: [DeliveryRecord] = []
        var after: String?
        var runs = 0
        repeat {
            let run = try await Program.running(
                ["deliveries"] + config + ["--key", "order-2", "--app", "demo", "--limit", "2", "--json"] + (after.map { ["--after", $0] } ?? []), killAfter: .seconds(120))
            #expect(run.status == 0, "\(run.standardError)")
            let page = try JSONDecoder().decode(Page.self, from: Data(run.standardOutput.utf8))
            paged += page.deliveries
            after = page.next
            runs += 1
        } while after != nil && runs < 10
        #expect(runs == 3 && paged == whole.deliveries, "pages of 2, as the whole list: \(paged.map(\.token))")
        let otherApp = try await Program.running(["deliveries"] + config + ["--key", "order-2", "--app", "elsewhere"], killAfter: .seconds(120))
        #expect(otherApp.standardOutput.isEmpty && otherApp.standardError.contains("no deliveries found"), "a key is per app")
        let more = try await Program.running(["deliveries"] + config + ["--key", "order-2", "--limit", "3"], killAfter: .seconds(120))
        #expect(more.standardOutput.split(separator: "\n").count == 3 && more.standardError.contains("--after "), "\(more.standardError)")
        let badCursor = try await Program.running(["deliveries"] + config + ["--key", "order-2", "--after", "nonsense"], killAfter: .seconds(120))
        #expect(badCursor.status != 0 && badCursor.standardError.contains("--after 'nonsense'"), "\(badCursor.standardError)")
        try await running.stop()
    }
}
