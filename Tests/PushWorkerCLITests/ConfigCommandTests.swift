import Foundation
import TestSupport
import Testing
import Yams

@Suite("pushworker config check")
struct ConfigCommandTests {
    private func write(_ text: String) throws -> URL {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString.prefix(8)).yaml")
        try Data(text.utf8).write(to: file)
        return file
    }

    @Test("prints the effective configuration with defaults and environment overrides, secrets masked, without connecting")
    func effective() async throws {
        let key = try write(try TestKeys.newP8())
        let config = try write("""
            amqp: {url: "amqp://worker:file-secret@broker.invalid:5672/", prefetch: 8}
            chunk_size: 500
            registry: {postgres: "postgres://app:pg-secret@db.invalid/push"}
            apps:
              - {name: news, topic: com.example.news, environment: sandbox, token: {key_file: \(key.path), key_id: ABC123DEFG, team_id: DEF123GHIJ}}
              - {name: chat, topic: com.example.chat, environment: production, token: {key_env: CHAT_KEY, key_id: ABC123DEFG, team_id: DEF123GHIJ}}
            """)
        let p8 = try TestKeys.newP8()
        let result = try await Program.running(["config", "check", "--config", config.path], environment: [
            "PUSHWORKER_AMQP_URL": "amqp://worker:env-secret@rabbit.invalid:5673/", "CHAT_KEY": p8,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        let output = result.standardOutput
        for secret in ["file-secret", "env-secret", "pg-secret", "PRIVATE KEY"] { #expect(!output.contains(secret), "\(secret) printed") }
        let document = try #require(try Yams.load(yaml: output) as? [String: Any])
        let amqp = try #require(document["amqp"] as? [String: Any])
        #expect((amqp["url"] as? String)?.hasPrefix("amqp://worker:***@rabbit.invalid:5673/") == true, "\(output)")
        #expect(amqp["prefetch"] as? Int == 8 && amqp["heartbeat_seconds"] as? Int == 30)
        #expect(document["chunk_size"] as? Int == 500 && document["retry_max_attempts"] as? Int == 6)
        #expect(((document["registry"] as? [String: Any])?["postgres"] as? String)?.contains("app:***@db.invalid") == true)
        let apps = try #require(document["apps"] as? [[String: Any]])
        #expect(apps.map { $0["name"] as? String } == ["news", "chat"])
        #expect(apps[0]["url"] as? String == "https://api.sandbox.push.apple.com:443" && apps[0]["transport"] as? String == "nghttp2")
        #expect((apps[1]["token"] as? [String: Any])?["key_env"] as? String == "CHAT_KEY")
    }

    @Test("a misspelt key, an unset variable or an unreadable key file: exit 1, naming the file and the key")
    func refused() async throws {
        let typo = try write("amqp: {prefech: 3}\napps: []\n")
        let misspelt = try await Program.running(["config", "check", "--config", typo.path])
        #expect(misspelt.status == 1)
        #expect(misspelt.standardError.contains("\(typo.path): amqp.prefech: unknown key; did you mean prefetch?"), "\(misspelt.standardError)")
        #expect(misspelt.standardOutput.isEmpty)

        let unset = try write("apps:\n  - {name: a, topic: t, environment: sandbox, token: {key_env: NO_SUCH_KEY_VARIABLE, key_id: K, team_id: T}}\n")
        let missing = try await Program.running(["config", "check", "--config", unset.path])
        #expect(missing.status == 1 && missing.standardError.contains("apps[0].token.key_env: environment variable NO_SUCH_KEY_VARIABLE is not set"), "\(missing.standardError)")

        let badURL = try write("registry: {postgres: \"postgres://app:pa^ss word@/push\"}\napps: []\n")
        let postgres = try await Program.running(["config", "check", "--config", badURL.path])
        #expect(postgres.status == 1 && postgres.standardError.contains("registry.postgres"), "\(postgres.standardError)")
        #expect(!(postgres.standardOutput + postgres.standardError).contains("pa^ss"))

        let unreadable = try write("apps:\n  - {name: a, topic: t, environment: sandbox, token: {key_file: /nonexistent.p8, key_id: K, team_id: T}}\n")
        let file = try await Program.running(["config", "check", "--config", unreadable.path])
        #expect(file.status == 1 && file.standardError.contains("apps[0].token.key_file: cannot read '/nonexistent.p8'"), "\(file.standardError)")
    }

    @Test("PUSHWORKER_AMQP_URL_FILE and PUSHWORKER_POSTGRES_URL_FILE: read from the files, masked; given twice, refused naming both")
    func secretFiles() async throws {
        let config = try write("registry: {postgres: \"postgres://app:file-pg@db.invalid/push\"}\napps: []\n")
        let amqp = try write("amqp://worker:amqp-from-file@rabbit.invalid:5673/\n")
        let postgres = try write("postgres://app:pg-from-file@db2.invalid/push\n")
        let result = try await Program.running(["config", "check", "--config", config.path], environment: [
            "PUSHWORKER_AMQP_URL_FILE": amqp.path, "PUSHWORKER_POSTGRES_URL_FILE": postgres.path,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(!result.standardOutput.contains("from-file"), "a secret printed: \(result.standardOutput)")
        let document = try #require(try Yams.load(yaml: result.standardOutput) as? [String: Any])
        #expect(((document["amqp"] as? [String: Any])?["url"] as? String)?.hasPrefix("amqp://worker:***@rabbit.invalid:5673/") == true, "\(result.standardOutput)")
        #expect(((document["registry"] as? [String: Any])?["postgres"] as? String)?.contains("app:***@db2.invalid") == true, "\(result.standardOutput)")

        let twice = try await Program.running(["config", "check", "--config", config.path], environment: [
            "PUSHWORKER_AMQP_URL_FILE": amqp.path, "PUSHWORKER_AMQP_URL": "amqp://worker:in-env@rabbit.invalid/",
        ])
        #expect(twice.status == 1)
        #expect(twice.standardError.contains("PUSHWORKER_AMQP_URL and PUSHWORKER_AMQP_URL_FILE are both set"), "\(twice.standardError)")
        #expect(!(twice.standardOutput + twice.standardError).contains("in-env") && !twice.standardError.contains("from-file"))

        let unreadable = try await Program.running(["queues", "check", "--config", config.path], environment: ["PUSHWORKER_AMQP_URL_FILE": "/nonexistent/amqp-url"])
        #expect(unreadable.status == 1 && unreadable.standardError.contains("PUSHWORKER_AMQP_URL_FILE: cannot read '/nonexistent/amqp-url'"), "\(unreadable.standardError)")
    }

    @Test("an app's fcm side: the service account file proved and shown without its key; a file that cannot serve names the key and the field")
    func fcm() async throws {
        let key = try write(try TestKeys.newP8())
        let account = try TestServiceAccount.file(tokenURI: "https://oauth2.googleapis.com/token")
        func app(_ fcm: String) -> String {
            """
            apps:
              - name: news
                topic: com.example.news
                environment: sandbox
                token: {key_file: \(key.path), key_id: ABC123DEFG, team_id: DEF123GHIJ}
                fcm: \(fcm)
            """
        }
        let good = try await Program.running(["config", "check", "--config", try write(app("{service_account: \(account.path), connections: 6}")).path])
        #expect(good.status == 0, "\(good.standardError)")
        #expect(!good.standardOutput.contains("PRIVATE KEY"))
        let document = try #require(try Yams.load(yaml: good.standardOutput) as? [String: Any])
        let fcm = try #require((document["apps"] as? [[String: Any]])?.first?["fcm"] as? [String: Any])
        #expect(fcm["project_id"] as? String == TestServiceAccount.projectID && fcm["client_email"] as? String == TestServiceAccount.clientEmail)
        #expect(fcm["url"] as? String == "https://fcm.googleapis.com" && fcm["connections"] as? Int == 6)
        #expect(fcm["token_uri"] as? String == "https://oauth2.googleapis.com/token")

        // From a variable, as a secret would come.
        let fromEnv = try await Program.running(
            ["config", "check", "--config", try write(app("{service_account_env: FCM_SA}")).path],
            environment: ["FCM_SA": String(decoding: try Data(contentsOf: account), as: UTF8.self)])
        #expect(fromEnv.status == 0, "\(fromEnv.standardError)")
        #expect(!fromEnv.standardOutput.contains("PRIVATE KEY") && fromEnv.standardOutput.contains("service_account_env: FCM_SA"))

        var fields = TestServiceAccount.fields()
        fields["private_key"] = nil
        let noKey = try write(String(decoding: TestServiceAccount.json(fields), as: UTF8.self))
        let missing = try await Program.running(["config", "check", "--config", try write(app("{service_account: \(noKey.path)}")).path])
        #expect(missing.status == 1)
        #expect(missing.standardError.contains("apps[0].fcm.service_account: \(noKey.path) has no private_key"), "\(missing.standardError)")
        let googleServices = try write(#"{"project_info": {"project_id": "x"}, "client": []}"#)
        let wrongFile = try await Program.running(["config", "check", "--config", try write(app("{service_account: \(googleServices.path)}")).path])
        #expect(wrongFile.status == 1 && wrongFile.standardError.contains("google-services.json, which holds no key"), "\(wrongFile.standardError)")
        let unset = try await Program.running(["config", "check", "--config", try write(app("{service_account_env: FCM_SA}")).path], environment: [:])
        #expect(unset.status == 1 && unset.standardError.contains("apps[0].fcm.service_account_env: environment variable FCM_SA is not set"), "\(unset.standardError)")
        let neither = try await Program.running(["config", "check", "--config", try write(app("{url: https://fcm.example.com}")).path])
        #expect(neither.status == 1 && neither.standardError.contains("apps[0].fcm: names no service account"), "\(neither.standardError)")
        let typo = try await Program.running(["config", "check", "--config", try write(app("{service_acount: \(account.path)}")).path])
        #expect(typo.status == 1 && typo.standardError.contains("service_acount: unknown key"), "\(typo.standardError)")
        // The app's proxy is FCM's too: a socks5 one needs the curl transport there as well.
        let socks = try write(app("{service_account: \(account.path)}").replacingOccurrences(of: "    fcm:", with: "    transport: curl\n    proxy: socks5://10.0.0.1:1080\n    fcm:"))
        let socksRun = try await Program.running(["config", "check", "--config", socks.path])
        #expect(socksRun.status == 1 && socksRun.standardError.contains("apps[0].fcm.transport: the app's socks5:// proxy needs transport: curl"), "\(socksRun.standardError)")
        let socksCurl = try write(app("{service_account: \(account.path), transport: curl}").replacingOccurrences(of: "    fcm:", with: "    transport: curl\n    proxy: socks5://10.0.0.1:1080\n    fcm:"))
        let curlRun = try await Program.running(["config", "check", "--config", socksCurl.path])
        #expect(curlRun.status == 0, "\(curlRun.standardError)")
    }
}
