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
        let pki = try TestKeys.newPKI()
        let p8 = try TestKeys.newP8()
        let publicKey = pki.appendingPathComponent("key.pub")
        try Data(try ES256Key.privateKey(pem: p8).publicKeyPEM.utf8).write(to: publicKey)
        let keyFile = pki.appendingPathComponent("key.p8")
        try Data(p8.utf8).write(to: keyFile)

        let process = Process()
        process.executableURL = Program.executable.deletingLastPathComponent().appendingPathComponent("mock-apns")
        process.arguments = ["--port", "0", "--report-port", "0", "--cert", pki.appendingPathComponent("server.pem").path,
            "--key", pki.appendingPathComponent("server.key").path, "--provider-key", "KEY1:TEAM1:\(publicKey.path)",
            "--topic", "com.example.app"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        defer { process.terminate(); process.waitUntilExit() }

        // "mock-apns listening on https://127.0.0.1:PORT, report endpoint http://127.0.0.1:PORT/counts"
        var banner = Data()
        while !banner.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw TestFailure("mock-apns exited without its banner") }
            banner.append(chunk)
        }
        let line = String(decoding: banner, as: UTF8.self)
        let urls = line.split(separator: " ").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: ",\n")) }.filter { $0.hasPrefix("http") }
        #expect(urls.count == 2, "\(line)")
        let serviceURL = try #require(urls.first)
        let countsURL = try #require(urls.last.flatMap(URL.init(string:)))

        let config = pki.appendingPathComponent("pushworker.yaml")
        try Data("""
            apps:
              - name: demo
                topic: com.example.app
                environment: sandbox
                url: \(serviceURL)
                ca_file: \(pki.appendingPathComponent("ca.pem").path)
                token: {key_file: \(keyFile.path), key_id: KEY1, team_id: TEAM1}
            """.utf8).write(to: config)
        let token = String(repeating: "5e", count: 32)
        for _ in 0..<3 {
            let sent = try Program.run(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":{"alert":"x"}}"#])
            #expect(sent.status == 0, "\(sent.standardError)")
        }

        let (data, response) = try await URLSession.shared.data(from: countsURL)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let counts = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect((counts["deliveries"] as? [String: Int])?[token] == 3, "\(counts)")
        #expect(counts["connections"] as? Int == 3)
    }
}
