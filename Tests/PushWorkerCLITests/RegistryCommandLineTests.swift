import Foundation
import TestSupport
import Testing

@Suite("pushworker registry")
struct RegistryCommandLineTests {
    static let token = String(repeating: "ab", count: 32)

    @Test("import applies a file of commands in batches; status tells whose a device is and whether a type reaches it; a bad line imports nothing")
    func importAndStatus() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("registry-cli-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config = directory.appendingPathComponent("pushworker.yaml")
        // A relative path: next to the configuration file.
        try Data("""
            registry: {sqlite: registry.db}
            apps:
              - {name: news, topic: com.example.news, environment: sandbox, token: {key_file: k.p8, key_id: ABC1234567, team_id: DEF1234567}}
            """.utf8).write(to: config)
        let lines = directory.appendingPathComponent("commands.jsonl")
        try Data("""
            {"command": "register_device", "app": "news", "token": "\(Self.token.uppercased())", "user": "u-1"}
            {"command": "add_to_group", "user": "u-1", "group": "staff"}

            {"command": "set_preferences", "user": "u-1", "blacklist": {"grades": []}}
            """.utf8).write(to: lines)
        let imported = try await Program.running(["registry", "import", "--config", config.path, "--batch", "2", lines.path])
        #expect(imported.status == 0, "\(imported.standardError)")
        #expect(imported.standardOutput == "imported 2 of 3\nimported 3 of 3\n")
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("registry.db").path))

        let status = try await Program.running(["registry", "status", "--config", config.path, "news", Self.token, "--type", "grades"])
        #expect(status.standardOutput.contains("registered, user u-1"), "\(status.standardOutput)\(status.standardError)")
        #expect(status.standardOutput.contains("filtered by u-1's preferences"))
        let unknown = try await Program.running(["registry", "status", "--config", config.path, "news", String(repeating: "cd", count: 32)])
        #expect(unknown.standardOutput.contains("not registered"))

        try Data("""
            {"command": "register_device", "app": "news", "token": "\(String(repeating: "ef", count: 32))"}
            {"command": "connect", "app": "news"}
            """.utf8).write(to: lines)
        let bad = try await Program.running(["registry", "import", "--config", config.path, lines.path])
        #expect(bad.status != 0)
        #expect(bad.standardError.contains("commands.jsonl:2") && bad.standardError.contains("token"), "\(bad.standardError)")
        let notImported = try await Program.running(["registry", "status", "--config", config.path, "news", String(repeating: "ef", count: 32)])
        #expect(notImported.standardOutput.contains("not registered"))

        let applied = try await Program.running(["registry", "apply", "--config", config.path, #"{"command": "unregister_device", "app": "news", "token": "\#(Self.token)"}"#])
        #expect(applied.status == 0 && applied.standardOutput.contains("ok: unregister_device"), "\(applied.standardError)")
    }
}
