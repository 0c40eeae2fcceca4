import APNs
import Foundation
import MockAPNs

/// A mock APNs over real TLS, with credentials made once per test process (the openssl runs are
/// the slow part): a CA and server certificate, a client certificate, and an ES256 signing key.
public struct MockAPNsFixture: Sendable {
    public static let keyID = "KEY1234567"
    public static let teamID = "TEAM123456"
    public static let topic = "com.example.app"

    /// The PKI directory (ca.pem, server.pem/key, client.pem/key/p12, key.p8, key.pub) and the
    /// signing key's PEM.
    public static let credentials: (pki: URL, p8: String) = {
        do {
            let pki = try TestKeys.newPKI()
            let p8 = try TestKeys.newP8()
            try Data(p8.utf8).write(to: pki.appendingPathComponent("key.p8"))
            try Data(try ES256Key.privateKey(pem: p8).publicKeyPEM.utf8).write(to: pki.appendingPathComponent("key.pub"))
            return (pki, p8)
        } catch {
            fatalError("cannot make test credentials: \(error)")
        }
    }()

    public let server: MockAPNsServer

    /// Starts a mock that trusts the signing key and the client CA and accepts `topic` (and its
    /// `.voip`); `change` adjusts anything else (faults, unregistered tokens, stream limit).
    public static func start(_ change: (inout MockAPNsConfiguration) -> Void = { _ in }) async throws -> MockAPNsFixture {
        TestLog.bootstrap()
        var configuration = MockAPNsConfiguration(certificateFile: path("server.pem"), privateKeyFile: path("server.key"))
        configuration.clientCAFile = path("ca.pem")
        configuration.providerKeys = [keyID: (teamID, try signingKey().publicKeyPEM)]
        configuration.topics = [topic, topic + ".voip", topic + ".push-type.liveactivity"]
        change(&configuration)
        let chosen = configuration
        return MockAPNsFixture(server: try await TestPorts.start { port in
            var configuration = chosen
            configuration.port = port
            return try await MockAPNsServer.start(configuration)
        })
    }

    public static func path(_ name: String) -> String { credentials.pki.appendingPathComponent(name).path }

    public static func signingKey() throws -> ES256Key { try ES256Key.privateKey(pem: credentials.p8) }

    /// The APNs transport the worker-level tests configure: `PUSHWORKER_TEST_TRANSPORT`
    /// (`nghttp2` or `curl`), nil for the default. The test command runs those suites a second
    /// time with `curl`, so both transports carry every worker behaviour, not only the client's.
    public static let transport: String? = ProcessInfo.processInfo.environment["PUSHWORKER_TEST_TRANSPORT"].flatMap { $0.isEmpty ? nil : $0 }

    /// A `pushworker` configuration's `apps:` entry named `name` that sends to this mock.
    public func appYAML(name: String = "demo", extra: [String] = []) -> String {
        ([
            "  - name: \(name)",
            "    topic: \(Self.topic)",
            "    environment: sandbox",
            "    url: \(server.url)",
            "    ca_file: \(Self.path("ca.pem"))",
            "    token: {key_file: \(Self.path("key.p8")), key_id: \(Self.keyID), team_id: \(Self.teamID)}",
        ] + (Self.transport.map { ["    transport: \($0)"] } ?? []) + extra.map { "    " + $0 }).joined(separator: "\n")
    }

    /// Writes a configuration file (a new one each call) and returns its path. Without a
    /// `metrics_address` of its own it serves none: workers of tests running at once would all
    /// want the default port.
    ///
    /// Results and retry queues are classic unless `quorumQueues`: on the single test node, five
    /// more quorum queues per test (hundreds in a run) left the node, restarted by the
    /// broker-restart test, timing out every login for the tests after it. The cluster tests and
    /// the migration test ask for the quorum default.
    public static func writeConfiguration(_ yaml: String, quorumQueues: Bool = false) throws -> URL {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pushworker-\(UUID().uuidString.prefix(8)).yaml")
        var text = yaml.contains("metrics_address") ? yaml : "metrics_address: null\n" + yaml
        if !quorumQueues {
            text = text.replacingOccurrences(of: "queues: {", with: "queues: {results_type: classic, retry_type: classic, ")
                .replacingOccurrences(of: "\nqueues:\n", with: "\nqueues:\n  results_type: classic\n  retry_type: classic\n")
        }
        try Data(text.utf8).write(to: file)
        return file
    }
}

extension MockAPNsFixture {
    /// The mock's FCM side knows `TestServiceAccount`.
    public static var fcmAccount: MockFCMAccount {
        MockFCMAccount(
            clientEmail: TestServiceAccount.clientEmail, projectID: TestServiceAccount.projectID, keyID: TestServiceAccount.keyID,
            publicKeyPEM: TestServiceAccount.publicKeyPEM)
    }

    /// An app's `fcm:` lines (for `appYAML(extra:)`, which indents them) sending to this mock with a key file of
    /// `TestServiceAccount` whose token endpoint is the mock's.
    public func fcmYAML() throws -> [String] {
        let file = try TestServiceAccount.file(tokenURI: "\(server.url)/token")
        return [
            "fcm:", "  service_account: \(file.path)", "  url: \(server.url)", "  ca_file: \(Self.path("ca.pem"))",
        ] + (Self.transport.map { ["  transport: \($0)"] } ?? [])
    }
}
