import APNs
import APNsHTTP2
import Foundation
import MockAPNs
import TestSupport
import Testing

/// HTTP/2 PING keepalive, which the nghttp2 transport adds (libcurl 7.88 sends none): APNs drops
/// idle connections, and a connection whose peer vanished must be found before a notification
/// waits on it for the whole request timeout.
@Suite("HTTP/2 PING keepalive (nghttp2 transport)")
struct KeepaliveTests {
    @Test("a quiet connection is PINGed, each PING is answered, and the same connection goes on serving")
    func quietConnection() async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: .nghttp2) { $0.pingInterval = .milliseconds(100); $0.pingTimeout = .seconds(30) }
        #expect(try await client.send(MockFixture.request(1)).status == 200)
        // Waits for progress, not for a total time: each answered PING resets the clock.
        var answered: UInt64 = 0
        var lastProgress = ContinuousClock.now
        while answered < 3 {
            try await Task.sleep(for: .milliseconds(50))
            let now = client.keepalivePings.answered
            if now > answered { answered = now; lastProgress = .now }
            if ContinuousClock.now - lastProgress > .seconds(30) { Issue.record("no PING answered for 30 s"); break }
        }
        #expect(try await client.send(MockFixture.request(2)).status == 200)
        #expect(fixture.server.connectionCount == 1)
        let pings = client.keepalivePings
        #expect(pings.sent >= pings.answered && pings.sent <= pings.answered + 1, "\(pings)")
        client.shutdown()
    }

    @Test("a PING left unanswered marks the connection dead: the request on it fails as a transport error, not at its timeout; a new connection serves")
    func vanishedPeer() async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        let proxy = try ConnectProxy()
        defer { proxy.stop() }
        let client = fixture.client(transport: .nghttp2) {
            $0.proxy = "http://127.0.0.1:\(proxy.port)"
            $0.pingInterval = .milliseconds(200)
            $0.pingTimeout = .milliseconds(500)
            // Far beyond the PING's verdict, so a timeout would show the PING did not act.
            $0.requestTimeout = .seconds(300)
            $0.transportRetries = 0
        }
        #expect(try await client.send(MockFixture.request(1)).status == 200)
        proxy.freeze()
        do {
            _ = try await client.send(MockFixture.request(2))
            Issue.record("answered through a frozen path")
        } catch {
            guard case .transport(let message) = error else { Issue.record("not a transport error: \(error)"); return }
            #expect(message.contains("PING"), "\(message)")
        }
        #expect(client.keepalivePings.sent > client.keepalivePings.answered)
        proxy.freeze(false)
        #expect(try await client.send(MockFixture.request(3)).status == 200)
        #expect(fixture.server.connectionCount == 2)
        #expect(Set(fixture.server.recorded.map(\.token)) == [MockFixture.deviceToken(1), MockFixture.deviceToken(3)])
        client.shutdown()
    }
}
