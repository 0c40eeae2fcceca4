import APNs
import APNsHTTP2
import Foundation
import MockAPNs
import TestSupport

/// A mock APNs over real TLS with fresh keys, and clients configured to reach it.
struct MockFixture {
    static let topic = "com.example.app"
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"

    /// One PKI and one signing key per test process: generating them is the slow part.
    static let shared: (pki: URL, p8: String) = {
        do {
            return (try TestKeys.newPKI(), try TestKeys.newP8())
        } catch {
            fatalError("cannot make test keys: \(error)")
        }
    }()

    let server: MockAPNsServer
    let pki: URL
    let signingKey: ES256Key

    static func start(_ change: (inout MockAPNsConfiguration) -> Void = { _ in }) async throws -> MockFixture {
        let (pki, p8) = shared
        let key = try ES256Key.privateKey(pem: p8)
        var configuration = MockAPNsConfiguration(
            certificateFile: pki.appendingPathComponent("server.pem").path,
            privateKeyFile: pki.appendingPathComponent("server.key").path)
        configuration.clientCAFile = pki.appendingPathComponent("ca.pem").path
        configuration.providerKeys = [keyID: (teamID, key.publicKeyPEM)]
        configuration.topics = [topic, topic + ".voip"]
        change(&configuration)
        return MockFixture(server: try await MockAPNsServer.start(configuration), pki: pki, signingKey: key)
    }

    func path(_ name: String) -> String { pki.appendingPathComponent(name).path }

    func tokenSource(clock: @escaping @Sendable () -> Date = { Date() }) -> ProviderTokenSource {
        ProviderTokenSource(keyID: Self.keyID, teamID: Self.teamID, key: signingKey, clock: clock)
    }

    func configuration(_ authentication: APNsClientConfiguration.Authentication? = nil, change: (inout APNsClientConfiguration) -> Void = { _ in }) -> APNsClientConfiguration {
        var configuration = APNsClientConfiguration(baseURL: server.url, authentication: authentication ?? .token(tokenSource()))
        configuration.caFile = path("ca.pem")
        configuration.connections = 1
        configuration.requestTimeout = .seconds(10)
        change(&configuration)
        return configuration
    }

    func client(_ authentication: APNsClientConfiguration.Authentication? = nil, change: (inout APNsClientConfiguration) -> Void = { _ in }) -> APNsClient {
        APNsClient(configuration: configuration(authentication, change: change))
    }

    static func deviceToken(_ index: Int) -> String {
        String(format: "%064x", index + 1)
    }

    static func request(_ index: Int = 0, change: (inout APNsRequest) -> Void = { _ in }) -> APNsRequest {
        var request = APNsRequest(deviceToken: deviceToken(index), topic: topic, payload: Array(#"{"aps":{"alert":"hello \#(index)"}}"#.utf8))
        change(&request)
        return request
    }
}
