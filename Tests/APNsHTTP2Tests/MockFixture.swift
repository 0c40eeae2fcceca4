import APNs
import APNsHTTP2
import Foundation
import MockAPNs
import TestSupport

/// The shared mock APNs fixture, with clients configured to reach it.
struct MockFixture {
    static let topic = MockAPNsFixture.topic
    static let keyID = MockAPNsFixture.keyID
    static let teamID = MockAPNsFixture.teamID
    static var shared: (pki: URL, p8: String) { MockAPNsFixture.credentials }

    let server: MockAPNsServer
    let signingKey: ES256Key

    static func start(_ change: (inout MockAPNsConfiguration) -> Void = { _ in }) async throws -> MockFixture {
        MockFixture(server: try await MockAPNsFixture.start(change).server, signingKey: try MockAPNsFixture.signingKey())
    }

    func path(_ name: String) -> String { MockAPNsFixture.path(name) }

    func tokenSource(clock: @escaping @Sendable () -> Date = { Date() }) -> ProviderTokenSource {
        ProviderTokenSource(keyID: Self.keyID, teamID: Self.teamID, key: signingKey, clock: clock)
    }

    func configuration(
        _ authentication: APNsClientConfiguration.Authentication? = nil, transport: APNsTransport,
        change: (inout APNsClientConfiguration) -> Void = { _ in }
    ) -> APNsClientConfiguration {
        var configuration = APNsClientConfiguration(baseURL: server.url, authentication: authentication ?? .token(tokenSource()))
        configuration.transport = transport
        configuration.caFile = path("ca.pem")
        configuration.connections = 1
        configuration.requestTimeout = .seconds(10)
        change(&configuration)
        return configuration
    }

    /// A client on `transport`: every client test runs on both, so neither is the one left untested.
    func client(
        _ authentication: APNsClientConfiguration.Authentication? = nil, transport: APNsTransport,
        change: (inout APNsClientConfiguration) -> Void = { _ in }
    ) -> APNsClient {
        APNsClient(configuration: configuration(authentication, transport: transport, change: change))
    }

    static func deviceToken(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 1) }

    static func request(_ index: Int = 0, change: (inout APNsRequest) -> Void = { _ in }) -> APNsRequest {
        var request = APNsRequest(deviceToken: deviceToken(index), topic: topic, payload: Array(#"{"aps":{"alert":"hello \#(index)"}}"#.utf8))
        change(&request)
        return request
    }
}
