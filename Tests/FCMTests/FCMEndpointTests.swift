import APNs
import APNsHTTP2
import CCurl
import FCM
import FCMHTTP2
import Foundation
import MockAPNs
import TestSupport
import Synchronization
import Testing

/// The token endpoint and messages:send of the mock, reached over real TLS and HTTP/2 as the
/// worker reaches Google's, with the service account's grant signed for real.
@Suite("FCM endpoints: access tokens and messages:send against the mock")
struct FCMEndpointTests {
    static let token = "cXyZ0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)

    static func start(_ change: (inout MockAPNsConfiguration) -> Void = { _ in }) async throws -> (MockAPNsFixture, FCMServiceAccount) {
        let mock = try await MockAPNsFixture.start { configuration in
            configuration.fcmAccounts = [
                MockFCMAccount(
                    clientEmail: TestServiceAccount.clientEmail, projectID: TestServiceAccount.projectID, keyID: TestServiceAccount.keyID,
                    publicKeyPEM: try! FCMServiceAccount(json: TestServiceAccount.json(TestServiceAccount.fields()), source: "sa.json").publicKeyPEM)
            ]
            change(&configuration)
        }
        let account = try FCMServiceAccount(json: TestServiceAccount.json(TestServiceAccount.fields(tokenURI: "\(mock.server.url)/token")), source: "sa.json")
        return (mock, account)
    }

    @Test("one grant serves many callers until the token nears its end; then one more")
    func renews() async throws {
        let (mock, account) = try await Self.start { $0.fcmTokenLifetime = 600 }
        defer { Task { try? await mock.server.shutdown() } }
        let source = FCMAccessTokenSource(account: account, caFile: MockAPNsFixture.path("ca.pem"))
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { try await source.token().value } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1 && tokens.first?.hasPrefix("mock-fcm-") == true)
        #expect(await source.grants == 1 && mock.server.fcmGrants.issued == 1)
        // Within five minutes of its end (600 s) a call starts the renewal, and is handed the
        // token still good meanwhile.
        let during = try await source.token(now: Date().addingTimeInterval(400))
        #expect(tokens.contains(during.value))
        var later = during
        for _ in 0..<200 where tokens.contains(later.value) {
            try await Task.sleep(for: .milliseconds(50))
            later = try await source.token()
        }
        #expect(!tokens.contains(later.value))
        #expect(await source.grants == 2 && mock.server.fcmGrants.issued == 2)
    }

    @Test("a token heard from the fleet is taken when it lasts longer, and no grant is asked for; the one granted here is told; the worker renewing first is the one with the larger margin")
    func adoptsTheFleetsToken() async throws {
        let (mock, account) = try await Self.start { $0.fcmTokenLifetime = 3600 }
        let early = FCMAccessTokenSource(account: account, caFile: MockAPNsFixture.path("ca.pem"), renewalMargin: 360)
        let late = FCMAccessTokenSource(account: account, caFile: MockAPNsFixture.path("ca.pem"), renewalMargin: 300)
        let told = Mutex<[FCMAccessToken]>([])
        await early.onGranted { token in told.withLock { $0.append(token) } }
        let granted = try await early.token()
        #expect(told.withLock { $0 } == [granted] && mock.server.fcmGrants.issued == 1)
        #expect(await late.shareable() == nil)
        #expect(await late.adopt(granted))
        #expect(try await late.token() == granted)
        #expect(await late.grants == 0)
        #expect(await early.shareable() == granted)
        // Only a token lasting longer replaces the one held; one about to lapse is never taken.
        #expect(!(await late.adopt(FCMAccessToken(value: "older", expiresAt: granted.expiresAt.addingTimeInterval(-60)))))
        #expect(!(await FCMAccessTokenSource(account: account).adopt(FCMAccessToken(value: "lapsing", expiresAt: Date().addingTimeInterval(10)))))
        // 330 s before its end: inside the early source's margin and outside the late one's.
        let at = granted.expiresAt.addingTimeInterval(-330)
        #expect(try await late.token(now: at) == granted)
        #expect(await late.grants == 0)
        #expect(await late.shareable(now: at) == granted)
        _ = try await early.token(now: at)
        #expect(await early.grants == 2)
        for _ in 0..<200 where told.withLock({ $0.count }) < 2 { try await Task.sleep(for: .milliseconds(25)) }
        let renewed = try #require(told.withLock { $0 }.last)
        #expect(renewed != granted && mock.server.fcmGrants.issued == 2, "the renewal is told to the fleet")
        #expect(try await early.token() == renewed)
        // A token FCM refused here is not taken back from the fleet, however long it lasts;
        // one lasting longer than Google grants, or not a bearer token's characters, neither.
        await late.invalidate(granted.value)
        #expect(!(await late.adopt(granted)))
        #expect(await late.adopt(renewed))
        #expect(!(await late.adopt(FCMAccessToken(value: "far", expiresAt: Date().addingTimeInterval(7200)))))
        #expect(!(await late.adopt(FCMAccessToken(value: "two words", expiresAt: renewed.expiresAt.addingTimeInterval(5)))))
        try await mock.server.shutdown()
    }

    @Test("a token still good is handed out while its renewal fails: a token endpoint away holds up no message")
    func renewalFails() async throws {
        let (mock, account) = try await Self.start { $0.fcmTokenLifetime = 200 }
        let source = FCMAccessTokenSource(account: account, caFile: MockAPNsFixture.path("ca.pem"), timeout: .seconds(5))
        // 200 s is inside the five-minute renewal margin: every call after this one wants a new token.
        let first = try await source.token()
        try await mock.server.shutdown()
        for _ in 0..<3 {
            #expect(try await source.token().value == first.value)
        }
        // Past its last use, with the endpoint still away, the caller hears why.
        do {
            _ = try await source.token(now: Date().addingTimeInterval(190))
            Issue.record("a token with 10 s left was handed out")
        } catch {
            guard case .unreachable = error else { Issue.record("not unreachable: \(error)"); return }
        }
    }

    @Test("a key the endpoint does not know is refused with Google's words, and not asked again at once")
    func refused() async throws {
        let (mock, _) = try await Self.start()
        defer { Task { try? await mock.server.shutdown() } }
        var fields = TestServiceAccount.fields(tokenURI: "\(mock.server.url)/token")
        fields["private_key"] = try await TestKeys.newRSAKey()
        let stranger = try FCMServiceAccount(json: TestServiceAccount.json(fields), source: "sa.json")
        let source = FCMAccessTokenSource(account: stranger, caFile: MockAPNsFixture.path("ca.pem"))
        for _ in 0..<3 {
            do {
                _ = try await source.token()
                Issue.record("a grant signed by an unknown key was taken")
            } catch {
                guard case .refused(let message) = error else { Issue.record("not a refusal: \(error)"); continue }
                #expect(message.contains("400") && message.contains("invalid_grant"))
                #expect(!message.contains("PRIVATE KEY"))
            }
        }
        #expect(mock.server.fcmGrants.refused == 1 && mock.server.fcmGrants.issued == 0)
        #expect(await source.grants == 1)
        // Nobody listening: unreachable, not refused.
        let nowhere = try FCMServiceAccount(json: TestServiceAccount.json(TestServiceAccount.fields(tokenURI: "https://127.0.0.1:1/token")), source: "sa.json")
        do {
            _ = try await FCMAccessTokenSource(account: nowhere, timeout: .seconds(5)).token()
            Issue.record("a token from nowhere")
        } catch {
            guard case .unreachable = error else { Issue.record("not unreachable: \(error)"); return }
        }
    }

    @Test("messages:send answers as FCM does: a name for a good message, and each ErrorCode with its details")
    func send() async throws {
        let (mock, account) = try await Self.start { configuration in
            configuration.fcmUnregisteredTokens = ["gone0123456789abcdefgh:APA91bH" + String(repeating: "x", count: 120)]
            configuration.fcmFailures = ["busy0123456789abcdefgh:APA91bH" + String(repeating: "y", count: 120): MockFCMFailure(
                status: 429, code: "QUOTA_EXCEEDED", retryAfter: 90, times: 1)]
        }
        defer { Task { try? await mock.server.shutdown() } }
        let bearer = try await FCMAccessTokenSource(account: account, caFile: MockAPNsFixture.path("ca.pem")).token().value
        let message = FCMMessage(notification: .init(title: "Hi", body: "There"), data: ["k": "v"], priority: .high, ttl: 60)
        func post(_ body: [UInt8], bearer: String? = bearer, project: String = TestServiceAccount.projectID) async throws -> CurlEasyExchange.Answer {
            let url = "\(mock.server.url)/v1/projects/\(project)/messages:send"
            let headers = ["content-type: application/json"] + (bearer.map { ["authorization: Bearer \($0)"] } ?? [])
            let ca = MockAPNsFixture.path("ca.pem")
            return try await CurlEasyExchange.perform(.post, url: url, headers: headers, body: body, threadName: "test-fcm") { easy in
                _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_CAINFO, ca)
            }.get()
        }
        func failure(_ answer: CurlEasyExchange.Answer) -> FCMFailure { FCMFailure(status: answer.status, retryAfter: nil, body: answer.body) }

        let sent = try await post(message.encoded().body(token: Self.token))
        #expect(sent.status == 200 && sent.isHTTP2)
        let name = (try JSONSerialization.jsonObject(with: Data(sent.body)) as? [String: Any])?["name"] as? String
        #expect(name?.hasPrefix("projects/\(TestServiceAccount.projectID)/messages/") == true)
        let recorded = try #require(mock.server.fcmMessages.first)
        #expect(recorded.token == Self.token && recorded.name == name && mock.server.fcmMessages.count == 1)

        let gone = try await post(message.encoded().body(token: "gone0123456789abcdefgh:APA91bH" + String(repeating: "x", count: 120)))
        #expect(gone.status == 404 && failure(gone) == .unregistered)
        let badToken = try await post(message.encoded().body(token: String(repeating: "ab", count: 32)))
        #expect(badToken.status == 400 && failure(badToken).reason == "INVALID_ARGUMENT")
        guard case .invalidToken = failure(badToken) else { Issue.record("not a bad token: \(failure(badToken))"); return }
        let number = try await post(Array(#"{"message":{"token":"\#(Self.token)","data":{"count":7}}}"#.utf8))
        #expect(failure(number) == .invalidMessage(field: "message.data[0].value", "Invalid value at 'message.data[0].value' (TYPE_STRING), 7"))
        let busyToken = "busy0123456789abcdefgh:APA91bH" + String(repeating: "y", count: 120)
        let busy = try await post(message.encoded().body(token: busyToken))
        #expect(busy.status == 429 && FCMFailure(status: 429, retryAfter: "90", body: busy.body) == .quotaExceeded(retryAfter: 90))
        #expect(try await post(message.encoded().body(token: busyToken)).status == 200)
        let stranger = try await post(message.encoded().body(token: Self.token), bearer: "ya29.not-issued")
        #expect(stranger.status == 401)
        guard case .credentials(let code, _) = failure(stranger), code == "UNAUTHENTICATED" else { Issue.record("not a credentials failure"); return }
        #expect(try await post(message.encoded().body(token: Self.token), project: "someone-else").status == 403)
        #expect(try await post(message.encoded().body(token: Self.token), bearer: nil).status == 401)
        #expect(mock.server.fcmMessages.count == 2)
    }

    /// The token endpoint as curl reaches it: the form, over HTTP/2 and the mock's TLS.
    static func grant(_ assertion: String, at mock: MockAPNsFixture) throws -> (status: Int, body: String) {
        let run = try Program.run(
            ["-s", "--http2", "--max-time", "20", "--cacert", MockAPNsFixture.path("ca.pem"), "--data-binary", "@-", "-w", "\n%{http_code}", "\(mock.server.url)/token"],
            input: Data(FCMGrant.formBody(assertion: assertion)), program: URL(fileURLWithPath: "/usr/bin/curl"))
        let lines = run.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    @Test("the token endpoint checks the assertion's RS256 signature, key id, issuer and expiry itself, and answers while every cooperative thread of its process is held")
    func grantChecks() async throws {
        // A second account whose key file has no private_key_id: its assertions carry no kid.
        var fields = TestServiceAccount.fields()
        fields["private_key_id"] = nil
        fields["client_email"] = "second@pushworker-test.iam.gserviceaccount.com"
        let (mock, account) = try await Self.start { configuration in
            configuration.fcmAccounts.append(MockFCMAccount(try! FCMServiceAccount(json: TestServiceAccount.json(fields), source: "second.json")))
        }
        defer { Task { try? await mock.server.shutdown() } }
        fields["token_uri"] = "\(mock.server.url)/token"
        let second = try FCMServiceAccount(json: TestServiceAccount.json(fields), source: "second.json")
        let good = try await FCMGrant.assertion(account)
        let expired = try await FCMGrant.assertion(account, now: Date().addingTimeInterval(-2 * FCMGrant.lifetime))
        // Valid claims of their own: a minute older, and the second account's (signed with the
        // same private key, but under no kid).
        let earlier = try await FCMGrant.assertion(account, now: Date().addingTimeInterval(-60))
        let secondGood = try await FCMGrant.assertion(second)
        // The second account's email as issuer, signed with the first's key under its key id.
        var impostor = TestServiceAccount.fields(tokenURI: "\(mock.server.url)/token")
        impostor["client_email"] = second.clientEmail
        let otherIssuer = try await FCMGrant.assertion(try FCMServiceAccount(json: TestServiceAccount.json(impostor), source: "impostor.json"))
        let (goodParts, earlierParts) = (good.split(separator: "."), earlier.split(separator: "."))
        let unsigned = Data(#"{"alg":"none","typ":"JWT","kid":"\#(TestServiceAccount.keyID)"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        // Signed, but not by the account's key for these claims, or not at all.
        for (what, forged) in [
            ("expired", expired),
            ("another payload under the signature", "\(goodParts[0]).\(earlierParts[1]).\(goodParts[2])"),
            ("another account as issuer under the first's key id", otherIssuer),
            ("alg none", "\(unsigned).\(goodParts[1])."),
            ("no signature", "\(goodParts[0]).\(goodParts[1])."),
        ] {
            let answer = try await Program.running(
                ["-s", "--http2", "--max-time", "20", "--cacert", MockAPNsFixture.path("ca.pem"), "--data-binary", "@-", "-w", "\n%{http_code}", "\(mock.server.url)/token"],
                input: Data(FCMGrant.formBody(assertion: forged)), program: URL(fileURLWithPath: "/usr/bin/curl"))
            #expect(answer.standardOutput.hasSuffix("\n400") && answer.standardOutput.contains("invalid_grant"), "\(what): \(answer.standardOutput)")
        }
        #expect(mock.server.fcmGrants == (issued: 0, refused: 5))
        // Each genuine assertion is granted, the second account's with no kid.
        #expect(try Self.grant(secondGood, at: mock).status == 200)
        #expect(try Self.grant(earlier, at: mock).status == 200)
        #expect(mock.server.fcmGrants == (issued: 2, refused: 5))

        // Every thread of Swift's cooperative pool held, this one in a synchronous curl: a grant
        // that awaited anything would wait for curl's 20 s and fail.
        let others = ProcessInfo.processInfo.activeProcessorCount - 1
        let held = Locked(0)
        let release = DispatchSemaphore(value: 0)
        for _ in 0..<others {
            Task.detached {
                held.withLock { $0 += 1 }
                release.wait()
            }
        }
        var waited = 0
        while held.value < others, waited < 60_000 {
            usleep(1000)
            waited += 1
        }
        let answer = Result { try Self.grant(good, at: mock) }
        for _ in 0..<others { release.signal() }
        let granted = try answer.get()
        #expect(granted.status == 200 && granted.body.contains("mock-fcm-"), "\(granted)")
        #expect(mock.server.fcmGrants == (issued: 3, refused: 5))
    }
}

@Suite("FCM client over the HTTP/2 engine, against the mock")
struct FCMClientTests {
    static func device(_ number: Int) -> String {
        "dev\(String(format: "%05d", number))abcdefghijklm:APA91bH" + String(repeating: "k7-_Qw", count: 20)
    }

    @Test("a message to many devices: each body its own token, one access token, every answer in its place, on both transports", arguments: [APNsTransport.nghttp2, .curl])
    func fanOut(transport: APNsTransport) async throws {
        let gone = Self.device(7)
        let (mock, account) = try await FCMEndpointTests.start { configuration in
            configuration.fcmUnregisteredTokens = [gone]
            configuration.fcmFailures = [Self.device(9): MockFCMFailure(status: 503, code: "UNAVAILABLE", retryAfter: 12)]
            configuration.maxConcurrentStreams = 100
        }
        defer { Task { try? await mock.server.shutdown() } }
        var configuration = FCMClient.Configuration()
        configuration.baseURL = mock.server.url
        configuration.caFile = MockAPNsFixture.path("ca.pem")
        configuration.transport = transport
        configuration.connections = 3
        // A request's deadline counts from when it is handed to a connection, through the
        // connection's opening and the one stream APNs-style servers allow at first: on a loaded
        // machine the first hundred waited more than the 15 s default.
        configuration.requestTimeout = .seconds(60)
        let client = FCMClient(configuration: configuration, tokens: FCMAccessTokenSource(account: account, caFile: MockAPNsFixture.path("ca.pem")))
        defer { client.shutdown() }
        let message = FCMMessage(notification: .init(title: "Sale", body: "Today only"), data: ["sale": "1"], priority: .normal, ttl: 600)
        let devices = (0..<500).map(Self.device) + ["not-a-token"]
        let answers = await client.send(message.encoded(), to: devices)
        #expect(answers.count == devices.count)
        #expect(answers[7] == .failed(.unregistered))
        #expect(answers[9] == .failed(.unavailable(retryAfter: 12)))
        guard case .failed(.invalidToken) = answers[500] else { Issue.record("a malformed token was not refused: \(answers[500])"); return }
        let accepted = answers.enumerated().filter { if case .accepted = $0.element { true } else { false } }
        #expect(accepted.count == 498)
        // Each device got its own message, named by FCM, and the mock saw each body's token once.
        let recorded = mock.server.fcmMessages
        #expect(Set(recorded.map(\.token)) == Set(devices[0..<500]).subtracting([gone, Self.device(9)]) && recorded.count == 498)
        for (index, answer) in accepted {
            guard case .accepted(let name) = answer else { continue }
            #expect(recorded.first { $0.name == name }?.token == devices[index])
        }
        let first = try #require(recorded.first)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(first.message)) as? [String: Any])
        #expect((body["message"] as? [String: Any])?["data"] as? [String: String] == ["sale": "1"])
        #expect(mock.server.fcmGrants.issued == 1)
        #expect(Set(recorded.map(\.connection)).count > 1)
    }

    @Test("through the app's proxy: the grant and the messages both go through its CONNECT tunnel, on both transports", arguments: [APNsTransport.nghttp2, .curl])
    func throughTheProxy(transport: APNsTransport) async throws {
        let (mock, account) = try await FCMEndpointTests.start()
        let proxy = try ConnectProxy()
        defer { proxy.stop() }
        var configuration = FCMClient.Configuration()
        configuration.baseURL = mock.server.url
        configuration.caFile = MockAPNsFixture.path("ca.pem")
        configuration.transport = transport
        configuration.proxy = "http://127.0.0.1:\(proxy.port)"
        let client = FCMClient(
            configuration: configuration, tokens: FCMAccessTokenSource(account: account, caFile: MockAPNsFixture.path("ca.pem"), proxy: configuration.proxy))
        let answers = await client.send(FCMMessage(notification: .init(title: "Hi")).encoded(), to: [Self.device(1), Self.device(2)])
        guard case .accepted = answers[0], case .accepted = answers[1] else { Issue.record("\(answers)"); return }
        let target = "127.0.0.1:\(mock.server.port)"
        #expect(proxy.requestedTargets.count >= 2 && Set(proxy.requestedTargets) == [target], "\(proxy.requestedTargets)")
        #expect(mock.server.fcmGrants.issued == 1 && mock.server.fcmMessages.count == 2)
        client.shutdown()
        try await mock.server.shutdown()
    }

    @Test("an access token FCM stops taking is replaced once and the devices sent again; a grant refused answers every device without a send")
    func renewsRefusedToken() async throws {
        let (mock, account) = try await FCMEndpointTests.start()
        defer { Task { try? await mock.server.shutdown() } }
        var configuration = FCMClient.Configuration()
        configuration.baseURL = mock.server.url
        configuration.caFile = MockAPNsFixture.path("ca.pem")
        let tokens = FCMAccessTokenSource(account: account, caFile: MockAPNsFixture.path("ca.pem"))
        let client = FCMClient(configuration: configuration, tokens: tokens)
        defer { client.shutdown() }
        let message = FCMMessage(data: ["k": "v"]).encoded()
        #expect(await client.send(message, to: [Self.device(1)]).allSatisfy { if case .accepted = $0 { true } else { false } })
        #expect(await client.send(message, to: [Self.device(2)]).allSatisfy { if case .accepted = $0 { true } else { false } })
        #expect(mock.server.fcmGrants.issued == 1)
        // The token the client holds is refused (401): a new one is asked for once, and the
        // devices refused for it are sent again with it.
        mock.server.revokeFCMTokens()
        let again = await client.send(message, to: [Self.device(3), Self.device(4)])
        #expect(again.allSatisfy { if case .accepted = $0 { true } else { false } })
        #expect(mock.server.fcmGrants.issued == 2)
        #expect(Set(mock.server.fcmMessages.map(\.token)) == Set((1...4).map(Self.device)))

        var fields = TestServiceAccount.fields(tokenURI: "\(mock.server.url)/token")
        fields["private_key"] = try await TestKeys.newRSAKey()
        let stranger = FCMClient(
            configuration: configuration,
            tokens: FCMAccessTokenSource(account: try FCMServiceAccount(json: TestServiceAccount.json(fields), source: "sa.json"), caFile: MockAPNsFixture.path("ca.pem")))
        defer { stranger.shutdown() }
        let before = mock.server.fcmMessages.count
        let refused = await stranger.send(message, to: [Self.device(5), Self.device(6)])
        #expect(refused.count == 2)
        for answer in refused {
            guard case .unanswered(let why) = answer else { Issue.record("sent without a token: \(answer)"); continue }
            #expect(why.contains("invalid_grant"))
        }
        #expect(mock.server.fcmMessages.count == before)
    }
}
