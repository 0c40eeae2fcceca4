import APNs
import APNsHTTP2
import Foundation
import MockAPNs
import TestSupport
import Testing

@Suite("APNs client against the mock, over TLS and HTTP/2")
struct APNsClientTests {
    @Test("a token-authenticated notification arrives with every header and the payload as sent", arguments: APNsTransport.allCases)
    func tokenAuth(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport)
        let id = UUID()
        let request = MockFixture.request {
            $0.priority = .conservePower
            $0.expiration = .at(Date(timeIntervalSince1970: 2_000_000_000))
            $0.collapseID = "match-42"
            $0.apnsID = id
        }
        let response = try await client.send(request)
        #expect(response.status == 200)
        #expect(response.apnsID == id.uuidString.lowercased())
        #expect(response.apnsUniqueID != nil)
        let recorded = try #require(fixture.server.recorded.first)
        #expect(recorded.token == request.deviceToken)
        #expect(recorded.topic == MockFixture.topic)
        #expect(recorded.pushType == "alert")
        #expect(recorded.priority == "5")
        #expect(recorded.expiration == "2000000000")
        #expect(recorded.collapseID == "match-42")
        #expect(recorded.apnsID == id.uuidString.lowercased())
        #expect(recorded.payload == request.payload)
        #expect(recorded.headers["authorization"]?.hasPrefix("bearer ey") == true)
        client.shutdown()
    }

    @Test("certificate auth with a .p12 and its password, and with PEM certificate and key", arguments: APNsTransport.allCases)
    func certificateAuth(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let p12 = fixture.client(.certificate(APNsCertificateIdentity(certificateFile: fixture.path("client.p12"), format: .p12, password: "test")), transport: transport)
        #expect(try await p12.send(MockFixture.request(1)).status == 200)
        let pem = fixture.client(.certificate(APNsCertificateIdentity(certificateFile: fixture.path("client.pem"), format: .pem, keyFile: fixture.path("client.key"))), transport: transport)
        #expect(try await pem.send(MockFixture.request(2)).status == 200)
        // No authorization header was sent: the certificate alone authenticated.
        #expect(fixture.server.recorded.allSatisfy { $0.headers["authorization"] == nil })

        let wrongPassword = fixture.client(.certificate(APNsCertificateIdentity(certificateFile: fixture.path("client.p12"), format: .p12, password: "nope")), transport: transport)
        do {
            _ = try await wrongPassword.send(MockFixture.request(3))
            Issue.record("sent with a wrong .p12 password")
        } catch {
            #expect(!error.isRetryable, "\(error)")
            #expect(!"\(error)".contains("nope"))
        }
        p12.shutdown(); pem.shutdown(); wrongPassword.shutdown()
    }

    @Test("a server certificate from an unknown CA is refused", arguments: APNsTransport.allCases)
    func verifiesServer(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport) { $0.caFile = nil }
        do {
            _ = try await client.send(MockFixture.request())
            Issue.record("trusted a certificate from an unknown CA")
        } catch {
            #expect("\(error)".contains("TLS verification"), "\(error)")
        }
        #expect(fixture.server.requestCount == 0)
        client.shutdown()
    }

    @Test("an invalid request is refused before it is sent", arguments: APNsTransport.allCases)
    func invalidNotSent(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport)
        do {
            _ = try await client.send(MockFixture.request { $0.collapseID = String(repeating: "x", count: 65) })
            Issue.record("sent an invalid request")
        } catch {
            guard case .invalidRequest(let validation) = error else { Issue.record("\(error)"); return }
            #expect(validation.field == "collapse_id")
        }
        #expect(fixture.server.requestCount == 0)
        client.shutdown()
    }

    @Test(
        "each injected APNs error comes back with its status and reason",
        arguments: APNsTransport.allCases, [APNsErrorReason.badDeviceToken, .deviceTokenNotForTopic, .topicDisallowed, .badCertificate, .forbidden,
            .invalidProviderToken, .badEnvironmentKeyInToken, .unregistered, .payloadTooLarge, .tooManyProviderTokenUpdates,
            .tooManyRequests, .internalServerError, .serviceUnavailable])
    func injectedErrors(transport: APNsTransport, reason: APNsErrorReason) async throws {
        let fixture = try await MockFixture.start { $0.faults = [MockAPNsFault(.reject(reason), tokens: [MockFixture.deviceToken(7)])] }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport)
        // A first, accepted request, as a connection's first one must be for the token to be trusted.
        #expect(try await client.send(MockFixture.request(1)).status == 200)
        let response = try await client.send(MockFixture.request(7))
        #expect(response.status == reason.status)
        #expect(response.reason == reason)
        client.shutdown()
    }

    @Test("an unregistered device answers 410 with the millisecond timestamp", arguments: APNsTransport.allCases)
    func unregistered(transport: APNsTransport) async throws {
        let since = Date(timeIntervalSince1970: 1_700_000_000.250)
        let fixture = try await MockFixture.start { $0.unregisteredTokens = [MockFixture.deviceToken(3): since] }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport)
        let response = try await client.send(MockFixture.request(3))
        #expect(response.status == 410)
        #expect(response.reason == .unregistered)
        #expect(response.timestamp == since)
        client.shutdown()
    }

    @Test("one provider token serves every request; ExpiredProviderToken gets a new one and a single retry", arguments: APNsTransport.allCases)
    func tokenRefresh(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let clock = Locked(Date())
        let source = fixture.tokenSource(clock: { clock.value })
        let client = fixture.client(.token(source), transport: transport)
        for index in 0..<20 { #expect(try await client.send(MockFixture.request(index)).status == 200) }
        let tokens = Set(fixture.server.recorded.compactMap { $0.headers["authorization"] })
        #expect(tokens.count == 1)

        // 21 minutes later APNs calls the token expired: a new one is signed and the send retried.
        clock.withLock { $0 = $0.addingTimeInterval(21 * 60) }
        fixture.server.setFaults([MockAPNsFault(.reject(.expiredProviderToken), times: 1)])
        let response = try await client.send(MockFixture.request(100))
        #expect(response.status == 200)
        let last = try #require(fixture.server.recorded.last?.headers["authorization"])
        #expect(!tokens.contains(last))
        #expect(fixture.server.requestCount == 22)

        // Expired again at once: the 20-minute rule forbids another new token, so no retry loop.
        fixture.server.setFaults([MockAPNsFault(.reject(.expiredProviderToken))])
        let refused = try await client.send(MockFixture.request(101))
        #expect(refused.reason == .expiredProviderToken)
        #expect(fixture.server.requestCount == 24)
        client.shutdown()
    }

    @Test("a batch: each answer in its request's slot, every valid request sent once with its own headers, an invalid one never",
        arguments: APNsTransport.allCases)
    func batch(transport: APNsTransport) async throws {
        let since = Date(timeIntervalSince1970: 1_700_000_000.250)
        let fixture = try await MockFixture.start {
            $0.unregisteredTokens = [MockFixture.deviceToken(5): since]
            // Answers that take a while, so that requests handed over together are seen together.
            $0.faults = [MockAPNsFault(.reject(.badDeviceToken), tokens: [MockFixture.deviceToken(7)]), MockAPNsFault(.latency(.milliseconds(20)))]
        }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport) { $0.maxConcurrentStreams = 50 }
        // One notification for 300 devices, as a job's fan-out; two of them differ.
        var requests = (0..<300).map { index in MockFixture.request(0) { $0.deviceToken = MockFixture.deviceToken(index) } }
        requests[9].collapseID = String(repeating: "x", count: 65)
        requests[20].priority = .conservePower
        requests[21].payload = Array(#"{"aps":{"alert":"another"}}"#.utf8)
        let results = await client.send(requests)
        #expect(results.count == 300)
        for (index, result) in results.enumerated() {
            switch (index, result) {
            case (9, .failure(.invalidRequest(let validation))): #expect(validation.field == "collapse_id")
            case (5, .success(let response)): #expect(response.status == 410 && response.reason == .unregistered && response.timestamp == since)
            case (7, .success(let response)): #expect(response.status == 400 && response.reason == .badDeviceToken)
            case (_, .success(let response)) where index != 5 && index != 7 && index != 9:
                #expect(response.status == 200 && response.apnsID != nil, "\(index)")
            default: Issue.record("request \(index): \(result)")
            }
        }
        // The mock records what it accepted: all but the invalid one (never sent) and the two it rejected.
        #expect(fixture.server.requestCount == 299)
        let recorded = fixture.server.recorded
        #expect(recorded.count == 297)
        let expected = Set(requests.map(\.deviceToken)).subtracting([5, 7, 9].map(MockFixture.deviceToken))
        #expect(Set(recorded.map(\.token)) == expected, "\(recorded.count) recorded")
        for notification in recorded {
            let request = try #require(requests.first { $0.deviceToken == notification.token })
            #expect(notification.payload == request.payload)
            #expect(notification.priority == (request.deviceToken == MockFixture.deviceToken(20) ? "5" : "10"))
            #expect(notification.headers["authorization"]?.hasPrefix("bearer ey") == true)
        }
        // Handed over at once: many streams in flight (one only while the connection was cold).
        #expect(recorded.first?.concurrentStreams == 1)
        #expect(recorded.map(\.concurrentStreams).max() ?? 0 > 1)
        client.shutdown()
    }

    @Test("a batch hands answers out as they come: a slow answer holds back only itself", arguments: APNsTransport.allCases)
    func batchWaves(transport: APNsTransport) async throws {
        // The slow answer is held until the 49 quick ones have reached the sending task, however
        // long a busy machine takes to bring them (a fixed latency of 10 s was once outlasted).
        // A client that held the quick answers back for the slow one would never open the gate:
        // the slow request then times out, and the checks below fail.
        let gate = MockAPNsGate()
        let fixture = try await MockFixture.start { $0.faults = [MockAPNsFault(.held(gate), tokens: [MockFixture.deviceToken(9)])] }
        defer {
            gate.open()
            Task { try? await fixture.server.shutdown() }
        }
        let client = fixture.client(transport: transport) { $0.requestTimeout = .seconds(60) }
        #expect(try await client.send(MockFixture.request(0)).status == 200)
        var waves: [[Int]] = []
        await client.send((1...50).map { MockFixture.request($0) }) { answers in
            #expect(answers.allSatisfy { (try? $0.result.get().status) == 200 })
            waves.append(answers.map { $0.index + 1 })
            if waves.joined().count == 49 { gate.open() }
        }
        // The 49 quick answers came in waves of their own; the slow one came last, alone.
        #expect(waves.last == [9], "\(waves)")
        #expect(waves.dropLast().flatMap { $0 }.sorted() == (1...50).filter { $0 != 9 }, "\(waves)")
        client.shutdown()
    }

    @Test("ExpiredProviderToken in a batch: one new token, and only the refused requests sent again", arguments: APNsTransport.allCases)
    func batchTokenRefresh(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let clock = Locked(Date())
        let client = fixture.client(.token(fixture.tokenSource(clock: { clock.value })), transport: transport)
        #expect(try await client.send(MockFixture.request(0)).status == 200)
        clock.withLock { $0 = $0.addingTimeInterval(21 * 60) }
        fixture.server.setFaults([MockAPNsFault(.reject(.expiredProviderToken), times: 3)])
        let results = await client.send((1...40).map { MockFixture.request($0) })
        #expect(results.allSatisfy { (try? $0.get().status) == 200 }, "\(results.filter { (try? $0.get().status) != 200 })")
        #expect(fixture.server.requestCount == 1 + 40 + 3)
        let recorded = fixture.server.recorded
        #expect(Set(recorded.map(\.token)).count == 41 && recorded.count == 41)
        #expect(Set(recorded.compactMap { $0.headers["authorization"] }).count == 2)
        client.shutdown()
    }

    @Test("a new connection carries one stream until a request is accepted, then up to the server's limit", arguments: APNsTransport.allCases)
    func streamLimit(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start {
            $0.maxConcurrentStreams = 8
            $0.faults = [MockAPNsFault(.latency(.milliseconds(30)))]
        }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport)
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<60 { group.addTask { try await client.send(MockFixture.request(index)).status } }
            for try await status in group { #expect(status == 200) }
        }
        let recorded = fixture.server.recorded
        #expect(recorded.count == 60)
        #expect(recorded.first?.concurrentStreams == 1)
        let peak = recorded.map(\.concurrentStreams).max() ?? 0
        #expect(peak > 1 && peak <= 8, "peak \(peak): \(recorded.map(\.concurrentStreams))")
        client.shutdown()
    }

    @Test("a request past the timeout fails as a timeout, and the client goes on working", arguments: APNsTransport.allCases)
    func timeout(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start { $0.faults = [MockAPNsFault(.latency(.seconds(3)), tokens: [MockFixture.deviceToken(9)])] }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport) { $0.requestTimeout = .milliseconds(500) }
        do {
            _ = try await client.send(MockFixture.request(9))
            Issue.record("no timeout")
        } catch {
            guard case .timeout = error else { Issue.record("\(error)"); return }
        }
        #expect(try await client.send(MockFixture.request(1)).status == 200)
        client.shutdown()
    }

    @Test("through an HTTP CONNECT proxy, the TLS session still ends at APNs", arguments: APNsTransport.allCases)
    func proxy(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let proxy = try ConnectProxy()
        defer { proxy.stop() }
        let client = fixture.client(transport: transport) { $0.proxy = "http://127.0.0.1:\(proxy.port)" }
        #expect(try await client.send(MockFixture.request(1)).status == 200)
        #expect(try await client.send(MockFixture.request(2)).status == 200)
        #expect(proxy.requestedTargets == ["127.0.0.1:\(fixture.server.port)"])
        #expect(fixture.server.recorded.count == 2)
        client.shutdown()
    }

    @Test("the requests in flight never exceed the connections' streams; the rest wait for room", arguments: APNsTransport.allCases)
    func boundedInFlight(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start { $0.faults = [MockAPNsFault(.latency(.milliseconds(20)))] }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport) { $0.maxConcurrentStreams = 3; $0.connections = 2 }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<100 { group.addTask { _ = try await client.send(MockFixture.request(index)) } }
            try await group.waitForAll()
        }
        #expect(fixture.server.recorded.count == 100)
        #expect(fixture.server.peakConcurrentRequests <= 6)
        client.shutdown()
    }
}
