import APNs
import APNsHTTP2
import Foundation
import MockAPNs
import TestSupport
import Testing

@Suite("Broadcast channel management against the mock")
struct ChannelManagerTests {
    static let app = MockFixture.topic

    /// A manager for `fixture`: the management API on the push port (nil `managementPort`), or
    /// on the mock's second listener.
    static func manager(_ fixture: MockFixture, _ authentication: APNsClientConfiguration.Authentication? = nil) -> APNsChannelManager {
        let configuration = fixture.configuration(authentication, transport: .nghttp2) { $0.managementURL = fixture.server.managementURL }
        return APNsChannelManager(configuration: configuration)
    }

    static func reason(of error: APNsChannelError) -> APNsErrorReason? {
        if case .rejected(_, let reason, _) = error { return reason }
        return nil
    }

    @Test("create, list, read, delete; the deleted channel is then ChannelNotRegistered", arguments: [false, true])
    func lifecycle(separateListener: Bool) async throws {
        let seeded = "c2VlZGVkLWNoYW5uZWwtMDE="
        let fixture = try await MockFixture.start {
            $0.channels = [Self.app: [seeded: .noMessageStored]]
            if separateListener { $0.managementPort = 0 }
        }
        defer { Task { try? await fixture.server.shutdown() } }
        #expect((fixture.server.managementPort != nil) == separateListener)
        let manager = Self.manager(fixture)

        let requestID = UUID()
        let created = try await manager.create(bundleID: Self.app, storagePolicy: .mostRecentMessageStored, requestID: requestID)
        #expect(created.requestID == requestID.uuidString.lowercased())
        #expect(created.storagePolicy == .mostRecentMessageStored)
        #expect(Data(base64Encoded: created.id)?.count == 16)
        #expect(fixture.server.channels[Self.app]?[created.id] == .mostRecentMessageStored)

        #expect(Set(try await manager.channels(bundleID: Self.app)) == [seeded, created.id])
        let read = try await manager.channel(bundleID: Self.app, id: created.id)
        #expect(read.storagePolicy == .mostRecentMessageStored)
        #expect(read.requestID != nil)
        #expect(try await manager.channel(bundleID: Self.app + ".push-type.liveactivity", id: seeded).storagePolicy == .noMessageStored)

        try await manager.delete(bundleID: Self.app, id: created.id)
        #expect(try await manager.channels(bundleID: Self.app) == [seeded])
        do {
            _ = try await manager.channel(bundleID: Self.app, id: created.id)
            Issue.record("read a deleted channel")
        } catch {
            #expect(Self.reason(of: error) == .channelNotRegistered)
            #expect("\(error)".contains("ChannelNotRegistered (400): the channel does not exist"), "\(error)")
        }
        await #expect(throws: APNsChannelError.self) { try await manager.delete(bundleID: Self.app, id: created.id) }
        // An app the credentials are not for is refused, as pushes to its topic are.
        do {
            _ = try await manager.channels(bundleID: "com.example.other")
            Issue.record("listed another app's channels")
        } catch {
            #expect(Self.reason(of: error) == .topicDisallowed)
        }
        manager.shutdown()
    }

    @Test("with a management listener of its own, the push port serves no management and that listener no pushes")
    func separateListener() async throws {
        let fixture = try await MockFixture.start { $0.managementPort = 0 }
        defer { Task { try? await fixture.server.shutdown() } }
        let onPushPort = APNsChannelManager(configuration: fixture.configuration(transport: .nghttp2))
        do {
            _ = try await onPushPort.channels(bundleID: Self.app)
            Issue.record("the push port served channel management")
        } catch {
            #expect(Self.reason(of: error) == .badPath, "\(error)")
        }
        let client = fixture.client(transport: .curl) {
            $0.baseURL = fixture.server.managementURL
        }
        #expect(try await client.send(MockFixture.request(1)).reason == .badPath)
        client.shutdown()
    }

    @Test("the channel limit answers CannotCreateChannelConfig, and nothing is created")
    func limit() async throws {
        let fixture = try await MockFixture.start {
            $0.maxChannels = 2
            $0.topics.insert("com.example.other")
        }
        defer { Task { try? await fixture.server.shutdown() } }
        let manager = Self.manager(fixture)
        _ = try await manager.create(bundleID: Self.app, storagePolicy: .noMessageStored)
        _ = try await manager.create(bundleID: Self.app, storagePolicy: .noMessageStored)
        do {
            _ = try await manager.create(bundleID: Self.app, storagePolicy: .noMessageStored)
            Issue.record("created past the limit")
        } catch {
            guard case .rejected(let status, let reason, let requestID) = error else { Issue.record("\(error)"); return }
            #expect(status == 400 && reason == .cannotCreateChannelConfig && requestID != nil)
            #expect("\(error)".contains("maximum number of channels"), "\(error)")
        }
        #expect(fixture.server.channels[Self.app]?.count == 2)
        // The limit is per app.
        _ = try await manager.create(bundleID: "com.example.other", storagePolicy: .mostRecentMessageStored)
        manager.shutdown()
    }

    @Test("a bad channel id or bundle id is refused before anything is sent")
    func refusedLocally() async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let manager = Self.manager(fixture)
        for id in ["", "not base64!", String(repeating: "A", count: 132)] {
            do {
                _ = try await manager.channel(bundleID: Self.app, id: id)
                Issue.record("sent '\(id)'")
            } catch {
                guard case .invalidRequest(let validation) = error else { Issue.record("\(error)"); continue }
                #expect(validation.field == "channel")
            }
        }
        do {
            try await manager.delete(bundleID: "com.example.app/../x", id: "c2VlZGVkLWNoYW5uZWwtMDE=")
            Issue.record("sent a bundle id with a slash")
        } catch {
            guard case .invalidRequest(let validation) = error else { Issue.record("\(error)"); return }
            #expect(validation.field == "topic")
        }
        #expect(fixture.server.requestCount == 0)
        manager.shutdown()
        do {
            _ = try await manager.channels(bundleID: Self.app)
            Issue.record("a shut-down manager sent")
        } catch {
            guard case .transport = error else { Issue.record("\(error)"); return }
        }
    }

    @Test("ExpiredProviderToken: a new token is signed and the call made once more; a second refusal is returned")
    func tokenRefresh() async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let clock = Locked(Date())
        let source = fixture.tokenSource(clock: { clock.value })
        let manager = Self.manager(fixture, .token(source))
        #expect(try await manager.channels(bundleID: Self.app).isEmpty)
        let first = try #require(source.installed)

        clock.withLock { $0 = $0.addingTimeInterval(21 * 60) }
        fixture.server.setFaults([MockAPNsFault(.reject(.expiredProviderToken), times: 1)])
        let created = try await manager.create(bundleID: Self.app, storagePolicy: .mostRecentMessageStored)
        #expect(fixture.server.channels[Self.app]?[created.id] != nil)
        #expect(fixture.server.requestCount == 3)
        #expect(source.installed?.jwt != first.jwt)

        // Refused again at once: the 20-minute rule allows no other token, so no loop.
        fixture.server.setFaults([MockAPNsFault(.reject(.expiredProviderToken))])
        do {
            try await manager.delete(bundleID: Self.app, id: created.id)
            Issue.record("deleted with a refused token")
        } catch {
            #expect(Self.reason(of: error) == .expiredProviderToken)
        }
        #expect(fixture.server.requestCount == 5)
        #expect(fixture.server.channels[Self.app]?[created.id] != nil)
        manager.shutdown()
    }

    @Test("a client certificate authenticates channel management; an injected fault targets one channel")
    func certificateAndFaults() async throws {
        let seeded = "c2VlZGVkLWNoYW5uZWwtMDE="
        let fixture = try await MockFixture.start {
            $0.channels = [Self.app: [seeded: .mostRecentMessageStored]]
            $0.faults = [MockAPNsFault(.reject(.internalServerError), channels: [seeded], times: 1)]
        }
        defer { Task { try? await fixture.server.shutdown() } }
        let manager = Self.manager(
            fixture, .certificate(APNsCertificateIdentity(certificateFile: fixture.path("client.pem"), format: .pem, keyFile: fixture.path("client.key"))))
        let created = try await manager.create(bundleID: Self.app, storagePolicy: .noMessageStored)
        #expect(try await manager.channel(bundleID: Self.app, id: created.id).storagePolicy == .noMessageStored)
        do {
            _ = try await manager.channel(bundleID: Self.app, id: seeded)
            Issue.record("the fault did not fire")
        } catch {
            guard case .rejected(500, .internalServerError, _) = error else { Issue.record("\(error)"); return }
        }
        #expect(try await manager.channel(bundleID: Self.app, id: seeded).storagePolicy == .mostRecentMessageStored)
        manager.shutdown()
    }

    @Test("the environments' management hosts and ports; a base URL serves both APIs unless told otherwise")
    func configuration() throws {
        let key = try MockAPNsFixture.signingKey()
        let source = ProviderTokenSource(keyID: MockFixture.keyID, teamID: MockFixture.teamID, key: key)
        #expect(APNsClientConfiguration(environment: .sandbox, authentication: .token(source)).managementURL
            == "https://api-manage-broadcast.sandbox.push.apple.com:2195")
        #expect(APNsClientConfiguration(environment: .production, authentication: .token(source)).managementURL
            == "https://api-manage-broadcast.push.apple.com:2196")
        #expect(APNsClientConfiguration(baseURL: "https://127.0.0.1:2197/", authentication: .token(source)).managementURL == "https://127.0.0.1:2197")
    }
}
