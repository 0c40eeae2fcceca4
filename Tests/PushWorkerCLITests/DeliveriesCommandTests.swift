import AMQP
import Foundation
import MockAPNs
import PushWorker
import Registry
import TestSupport
import Testing

/// `pushworker deliveries` against the ledger a running worker wrote, as an operator asks it.
@Suite("pushworker deliveries", .usesBroker)
struct DeliveriesCommandTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xDE11) }

    @Test("by job, user and token, newest first, as lines or JSON; a bad option names itself", arguments: [RegistryWorkerTests.Kind.sqlite, .postgres])
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
        let records = try JSONDecoder().decode([DeliveryRecord].self, from: Data(byUser.standardOutput.utf8))
        #expect(records.map(\.token) == [Self.token(1)] && records.first?.jobID == "ledger-1" && records.first?.apnsID != nil, "\(byUser.standardOutput)")

        let byToken = try await Program.running(["deliveries"] + config + ["--token", Self.token(2).uppercased(), "--since", "2020-01-01T00:00:00Z"], killAfter: .seconds(120))
        #expect(byToken.standardOutput.contains("ledger-1"), "\(byToken.standardOutput)\(byToken.standardError)")
        let none = try await Program.running(["deliveries"] + config + ["--token", Self.token(2), "--until", "1000"], killAfter: .seconds(120))
        #expect(none.status == 0 && none.standardOutput.isEmpty && none.standardError.contains("no deliveries found"))

        let bad = try await Program.running(["deliveries"] + config + ["--job", "x", "--since", "Tuesday"], killAfter: .seconds(120))
        #expect(bad.status != 0 && bad.standardError.contains("--since 'Tuesday'"), "\(bad.standardError)")
        let two = try await Program.running(["deliveries"] + config + ["--job", "x", "--user", "y"], killAfter: .seconds(120))
        #expect(two.status != 0 && two.standardError.contains("exactly one of --job, --user and --token"), "\(two.standardError)")
        try await running.stop()
    }
}
