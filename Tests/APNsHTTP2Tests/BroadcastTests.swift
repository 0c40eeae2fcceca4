import APNs
import APNsHTTP2
import Foundation
import MockAPNs
import TestSupport
import Testing

@Suite("Live Activity broadcasts through the client, against the mock")
struct BroadcastTests {
    /// A channel that keeps the latest message, and one that keeps nothing.
    static let stored = "c3RvcmVkLWNoYW5uZWwtMDE="
    static let unstored = "bm9uZS1jaGFubmVsLTAwMDE="

    static func start(_ change: (inout MockAPNsConfiguration) -> Void = { _ in }) async throws -> MockFixture {
        try await MockFixture.start {
            $0.channels = [MockFixture.topic: [stored: .mostRecentMessageStored, unstored: .noMessageStored]]
            change(&$0)
        }
    }

    static func broadcast(_ channel: String = stored, change: (inout APNsRequest) -> Void = { _ in }) -> APNsRequest {
        var request = APNsRequest(
            deviceToken: "", topic: MockFixture.topic, pushType: .liveactivity,
            payload: Array(#"{"aps":{"event":"update","content-state":{"score":"2-1"},"timestamp":1700000000}}"#.utf8), channelID: channel)
        change(&request)
        return request
    }

    @Test("a broadcast is delivered once, with the channel's headers, and APNs' request id read back", arguments: APNsTransport.allCases)
    func delivered(transport: APNsTransport) async throws {
        let fixture = try await Self.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport)
        let id = UUID()
        let request = Self.broadcast {
            $0.priority = .conservePower
            $0.expiration = .at(Date(timeIntervalSince1970: 2_000_000_000))
            $0.requestID = id
        }
        let response = try await client.send(request)
        #expect(response.status == 200)
        #expect(response.requestID == id.uuidString.lowercased())
        #expect(response.sends == 1)
        let broadcasts = fixture.server.broadcasts
        #expect(broadcasts.count == 1)
        let recorded = try #require(broadcasts.first)
        #expect(recorded.bundleID == MockFixture.topic)
        #expect(recorded.channelID == Self.stored)
        #expect(recorded.requestID == id.uuidString.lowercased())
        #expect(recorded.pushType == "liveactivity")
        #expect(recorded.priority == "5")
        #expect(recorded.expiration == "2000000000")
        #expect(recorded.headers["apns-topic"] == nil)
        #expect(recorded.headers["authorization"]?.hasPrefix("bearer ey") == true)
        #expect(recorded.payload == request.payload)
        #expect(fixture.server.recorded.isEmpty)

        // Without a request id of its own, the one APNs made comes back.
        let second = try await client.send(Self.broadcast())
        #expect(second.status == 200)
        #expect(second.requestID.map { UUID(uuidString: $0) != nil } == true)
        #expect(fixture.server.broadcasts.count == 2)
        client.shutdown()
    }

    @Test("a client certificate authenticates broadcasts too", arguments: APNsTransport.allCases)
    func certificate(transport: APNsTransport) async throws {
        let fixture = try await Self.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(
            .certificate(APNsCertificateIdentity(certificateFile: fixture.path("client.p12"), format: .p12, password: "test")), transport: transport)
        #expect(try await client.send(Self.broadcast()).status == 200)
        #expect(fixture.server.broadcasts.first?.headers["authorization"] == nil)
        client.shutdown()
    }

    @Test("APNs' refusals come back with their reason and request id, sent once: an unknown channel, an expiration on a channel that stores nothing",
        arguments: APNsTransport.allCases)
    func refused(transport: APNsTransport) async throws {
        let fixture = try await Self.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport)
        #expect(try await client.send(Self.broadcast()).status == 200)

        let unknown = try await client.send(Self.broadcast("dW5rbm93bi1jaGFubmVsLTA="))
        #expect(unknown.status == 400)
        #expect(unknown.reason == .channelNotRegistered)
        #expect(unknown.disposition == .final)
        #expect(unknown.requestID != nil)

        let expiring = try await client.send(Self.broadcast(Self.unstored) { $0.expiration = .at(Date(timeIntervalSince1970: 2_000_000_000)) })
        #expect(expiring.reason == .badExpirationDate)
        // Expiration 0 (try once, store nothing) is what such a channel takes.
        #expect(try await client.send(Self.broadcast(Self.unstored) { $0.expiration = .immediately }).status == 200)
        #expect(fixture.server.requestCount == 4)
        #expect(fixture.server.broadcasts.map(\.channelID) == [Self.stored, Self.unstored])
        client.shutdown()
    }

    @Test(
        "injected refusals on one channel: a 429 or 500 is returned as is (the client resends only after connection trouble)",
        arguments: APNsTransport.allCases, [APNsErrorReason.tooManyRequests, .internalServerError, .serviceUnavailable, .featureNotEnabled])
    func injected(transport: APNsTransport, reason: APNsErrorReason) async throws {
        let fixture = try await Self.start { $0.faults = [MockAPNsFault(.reject(reason), channels: [Self.unstored])] }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport)
        #expect(try await client.send(Self.broadcast()).status == 200)
        let response = try await client.send(Self.broadcast(Self.unstored))
        #expect(response.status == reason.status)
        #expect(response.reason == reason)
        #expect(response.sends == 1)
        #expect(fixture.server.requestCount == 2)
        // The fault filters by channel: device pushes are untouched.
        #expect(try await client.send(MockFixture.request(1)).status == 200)
        client.shutdown()
    }

    @Test("a broadcast whose connection dropped unanswered is sent again on a new connection, once", arguments: APNsTransport.allCases)
    func droppedConnection(transport: APNsTransport) async throws {
        let fixture = try await Self.start { $0.faults = [MockAPNsFault(.resetConnection(afterRequests: 1), channels: [Self.unstored], times: 1)] }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport)
        #expect(try await client.send(Self.broadcast()).status == 200)
        let response = try await client.send(Self.broadcast(Self.unstored))
        #expect(response.status == 200)
        #expect(response.sends == 2)
        #expect(fixture.server.broadcasts.count == 2)
        client.shutdown()
    }

    @Test("devices and broadcasts in one batch: each answered in its slot, the fan-out unchanged", arguments: APNsTransport.allCases)
    func mixedBatch(transport: APNsTransport) async throws {
        let fixture = try await Self.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport) { $0.maxConcurrentStreams = 50 }
        var requests = (0..<40).map { MockFixture.request($0) }
        requests.insert(Self.broadcast(), at: 10)
        requests.insert(Self.broadcast(Self.unstored), at: 11)
        requests.insert(Self.broadcast("dW5rbm93bi1jaGFubmVsLTA="), at: 30)
        requests.append(Self.broadcast { $0.channelID = "not base64" })
        let results = await client.send(requests)
        #expect(results.count == 44)
        for (index, result) in results.enumerated() {
            switch (index, result) {
            case (30, .success(let response)): #expect(response.reason == .channelNotRegistered)
            case (43, .failure(.invalidRequest(let error))): #expect(error.field == "channel")
            case (_, .success(let response)) where index != 30 && index != 43:
                #expect(response.status == 200, "\(index)")
                #expect(requests[index].isBroadcast == (response.requestID != nil), "\(index)")
            default: Issue.record("request \(index): \(result)")
            }
        }
        #expect(Set(fixture.server.recorded.map(\.token)) == Set((0..<40).map(MockFixture.deviceToken)))
        #expect(fixture.server.recorded.count == 40)
        #expect(fixture.server.broadcasts.map(\.channelID).sorted() == [Self.stored, Self.unstored].sorted())
        client.shutdown()
    }

    @Test("the report endpoint lists broadcasts and counts them per channel, for other processes")
    func report() async throws {
        let fixture = try await Self.start { $0.reportPort = 0 }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: .nghttp2)
        #expect(try await client.send(Self.broadcast()).status == 200)
        #expect(try await client.send(Self.broadcast()).status == 200)
        #expect(try await client.send(MockFixture.request(1)).status == 200)
        let port = try #require(fixture.server.reportPort)
        let counts = try #require(await HTTPProbe.get(port: port, "/counts"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(counts.body.utf8)) as? [String: Any])
        #expect(object["broadcasts"] as? [String: Int] == [Self.stored: 2])
        #expect((object["deliveries"] as? [String: Int])?.count == 1)
        let listed = try #require(await HTTPProbe.get(port: port, "/broadcasts"))
        let broadcasts = try #require(try JSONSerialization.jsonObject(with: Data(listed.body.utf8)) as? [[String: Any]])
        #expect(broadcasts.count == 2)
        #expect(broadcasts.first?["channel_id"] as? String == Self.stored)
        #expect(broadcasts.first?["bundle_id"] as? String == MockFixture.topic)
        #expect((broadcasts.first?["headers"] as? [String: String])?["authorization"] == nil)
        client.shutdown()
    }
}
