import APNs
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TestSupport
import Testing

@Suite("mock-apns program")
struct MockAPNsProgramTests {
    @Test("serves notifications and reports them on its HTTP endpoint")
    func serveAndReport() async throws {
        let path = MockAPNsFixture.path

        let process = try ChildProcess(Program.built("mock-apns").path, arguments: ["--port", "0", "--report-port", "0", "--cert", path("server.pem"),
            "--key", path("server.key"), "--provider-key", "\(MockAPNsFixture.keyID):\(MockAPNsFixture.teamID):\(path("key.pub"))",
            "--topic", "com.example.app"], output: .pipe, error: .inherit)
        let output = try #require(process.standardOutput)
        defer {
            process.signal(SIGTERM)
            process.waitUntilExit()
        }

        // "mock-apns listening on https://127.0.0.1:PORT, report endpoint http://127.0.0.1:PORT/counts"
        var banner = Data()
        while !banner.contains(UInt8(ascii: "\n")) {
            let chunk = output.availableData
            guard !chunk.isEmpty else { throw TestFailure("mock-apns exited without its banner") }
            banner.append(chunk)
        }
        let line = String(decoding: banner, as: UTF8.self)
        let urls = line.split(separator: " ").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: ",\n")) }.filter { $0.hasPrefix("http") }
        #expect(urls.count == 2, "\(line)")
        let serviceURL = try #require(urls.first)
        let countsURL = try #require(urls.last.flatMap(URL.init(string:)))

        // The same app entry the in-process fixture writes, pointed at this process instead.
        let config = try MockAPNsFixture.writeConfiguration("""
            apps:
              - name: demo
                topic: \(MockAPNsFixture.topic)
                environment: sandbox
                url: \(serviceURL)
                ca_file: \(path("ca.pem"))
                token: {key_file: \(path("key.p8")), key_id: \(MockAPNsFixture.keyID), team_id: \(MockAPNsFixture.teamID)}
            """)
        let token = String(repeating: "5e", count: 32)
        for _ in 0..<3 {
            let sent = try await Program.running(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":{"alert":"x"}}"#])
            #expect(sent.status == 0, "\(sent.standardError)")
        }

        let (data, response) = try await URLSession.shared.data(from: countsURL)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let counts = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect((counts["deliveries"] as? [String: Int])?[token] == 3, "\(counts)")
        #expect(counts["connections"] as? Int == 3)
    }
}
