import APNs
import Foundation
import MockAPNs
import TestSupport
import Testing

@Suite("pushworker send")
struct SendCommandTests {
    @Test("sends one notification through the configured app and prints the answer; a rejection exits 1")
    func sendsAndReports() async throws {
        let gone = String(repeating: "dd", count: 32)
        let fixture = try await MockAPNsFixture.start { $0.unregisteredTokens = [gone: Date(timeIntervalSince1970: 1_700_000_000)] }
        let server = fixture.server
        defer { Task { try? await server.shutdown() } }
        let config = try MockAPNsFixture.writeConfiguration("apps:\n" + fixture.appYAML())

        let token = String(repeating: "ab", count: 32)
        let sent = try Program.run(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":{"alert":"hi"}}"#,
            "--collapse-id", "c1", "--expiration", "+60", "--priority", "5"])
        #expect(sent.status == 0, "\(sent.standardError)")
        #expect(sent.standardOutput.contains("status: 200"))
        #expect(sent.standardOutput.contains("apns-id: "))
        let recorded = try #require(server.recorded.first)
        #expect(recorded.token == token && recorded.collapseID == "c1" && recorded.priority == "5")

        let rejected = try Program.run(["send", "--config", config.path, "--app", "demo", "--token", gone, "--payload", #"{"aps":{}}"#])
        #expect(rejected.status == 1)
        #expect(rejected.standardOutput.contains("status: 410"))
        #expect(rejected.standardOutput.contains("reason: Unregistered"))
        #expect(rejected.standardOutput.contains("timestamp: 2023-11-14T22:13:20Z"))

        let invalid = try Program.run(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":{}}"#, "--push-type", "toast"])
        #expect(invalid.status != 0)
        #expect(invalid.standardError.contains("unknown push type 'toast'"))
        let badJSON = try Program.run(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":"#])
        #expect(badJSON.standardError.contains("the payload is not valid JSON at line 1, column 8"), "\(badJSON.standardError)")
        #expect(server.requestCount == 2)
    }
}
