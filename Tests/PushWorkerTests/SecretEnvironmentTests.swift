import Foundation
import PushWorker
import SecretEnvironment
import TestSupport
import Testing

/// `NAME_FILE` for every secret: Docker and Kubernetes mount secrets as files.
@Suite("Secrets given as files (NAME_FILE)")
struct SecretEnvironmentTests {
    @Test("a value from the variable or from its file; one trailing line break dropped")
    func values() throws {
        #expect(try SecretEnvironment.value(of: "S", in: ["S": "plain"]) == "plain")
        #expect(try SecretEnvironment.value(of: "S", in: [:]) == nil)
        #expect(try SecretEnvironment.value(of: "S", in: ["S_FILE": try TemporaryFile.write("amqp://u:p@h/\n")]) == "amqp://u:p@h/")
        #expect(try SecretEnvironment.value(of: "S", in: ["S_FILE": try TemporaryFile.write("pass\r\n")]) == "pass")
        #expect(try SecretEnvironment.value(of: "S", in: ["S_FILE": try TemporaryFile.write("two\n\n")]) == "two\n", "only one line break is the file's")
        let pem = "-----BEGIN PRIVATE KEY-----\nABC\n-----END PRIVATE KEY-----\n"
        #expect(try SecretEnvironment.value(of: "S", in: ["S_FILE": try TemporaryFile.write(pem)]) == String(pem.dropLast()))
    }

    @Test("both set, an unreadable file or an empty one: refused, naming the variables and the path, never the value")
    func refusals() throws {
        let secretFile = try TemporaryFile.write("hunter2-in-file")
        let cases: [([String: String], String)] = [
            (["S": "hunter2", "S_FILE": secretFile], "S and S_FILE are both set: give the value one way"),
            (["S_FILE": "/nonexistent/secret"], "S_FILE: cannot read '/nonexistent/secret': no such file"),
            (["S_FILE": "/tmp"], "S_FILE: cannot read '/tmp': it is a directory"),
            // The value given where its file's path belongs: not printed back.
            (["S_FILE": "amqp://user:hunter2@broker/"], "S_FILE is not an absolute file path"),
            (["S_FILE": "/amqp://user:hunter2@broker/"], "S_FILE is not an absolute file path"),
            (["S_FILE": try TemporaryFile.write("")], "S_FILE: '"),
            (["S_FILE": try TemporaryFile.write("\n")], "is empty"),
        ]
        for (environment, expected) in cases {
            do {
                let value = try SecretEnvironment.value(of: "S", in: environment)
                Issue.record("accepted \(environment): \(value ?? "nil")")
            } catch {
                #expect(error.variable == "S" && error.message.contains(expected), "\(error.message)")
                #expect(!error.message.contains("hunter2"), "the secret is printed")
            }
        }
    }

    @Test("resolving reads the listed variables' files and drops the _FILE variables; others untouched")
    func resolving() throws {
        let path = try TemporaryFile.write("postgres://app:pw@db/push\n")
        let resolved = try SecretEnvironment.resolving(
            ["PUSHWORKER_AMQP_URL", "PUSHWORKER_POSTGRES_URL"],
            in: ["PUSHWORKER_POSTGRES_URL_FILE": path, "PUSHWORKER_AMQP_URL": "amqp://x", "OTHER_FILE": "/nonexistent"])
        #expect(resolved == ["PUSHWORKER_POSTGRES_URL": "postgres://app:pw@db/push", "PUSHWORKER_AMQP_URL": "amqp://x", "OTHER_FILE": "/nonexistent"])
    }

    @Test("the variables a configuration names (key_env, password_env, page_token_env) take _FILE too")
    func configurationVariables() throws {
        let key = try TemporaryFile.write(try TestKeys.newP8())
        let yaml = """
            metrics_address: 127.0.0.1:0
            ledger: {page_token_env: PAGE_TOKEN}
            apps:
              - {name: a, topic: com.example.a, environment: sandbox, token: {key_env: APP_KEY, key_id: ABC123DEFG, team_id: DEF123GHIJ}}
            """
        let configuration = try PushWorkerConfiguration.parse(yaml, file: "/tmp/f.yaml")
        let token = try TemporaryFile.write("0123456789abcdef-from-file\n")
        let plan = try WorkerPlan(configuration, file: "/tmp/f.yaml", environment: ["APP_KEY_FILE": key, "PAGE_TOKEN_FILE": token])
        #expect(plan.deliveriesPageToken == "0123456789abcdef-from-file")
        do {
            _ = try configuration.apps[0].clientConfiguration(file: "/tmp/f.yaml", index: 0, environment: ["APP_KEY_FILE": key, "APP_KEY": "x"])
            Issue.record("accepted a key given twice")
        } catch {
            #expect("\(error)" == "/tmp/f.yaml: apps[0].token.key_env: APP_KEY and APP_KEY_FILE are both set: give the value one way")
        }
    }
}
