@testable import AMQP
import Testing

/// The connection's states and transitions, with a stand-in for the C handle.
@Suite("Connection lifecycle")
struct ConnectionLifecycleTests {
    final class FakeConnection {
        let name: String
        init(_ name: String) { self.name = name }
    }

    @Test("the first connection: generation 1, not a reconnect, attempts counted")
    func firstConnection() {
        var lifecycle = ConnectionLifecycle<FakeConnection>(addressCount: 1)
        #expect(lifecycle.connection == nil)
        #expect(!lifecycle.isShuttingDown)
        #expect(lifecycle.generation == 0)
        lifecycle.attemptFailed()
        #expect(lifecycle.beginBackoff() == 0)
        #expect(lifecycle.failedAttempts == 1)
        let established = lifecycle.connected(FakeConnection("a"))
        #expect(established.attempts == 2)
        #expect(!established.reconnected)
        #expect(!established.failover)
        #expect(lifecycle.generation == 1)
        #expect(lifecycle.connection?.name == "a")
        #expect(lifecycle.failedAttempts == 0)
    }

    @Test("a lost connection is handed back, and the next one is a new generation")
    func reconnect() {
        var lifecycle = ConnectionLifecycle<FakeConnection>(addressCount: 1)
        _ = lifecycle.connected(FakeConnection("a"))
        #expect(lifecycle.lost().name == "a")
        #expect(lifecycle.connection == nil)
        #expect(!lifecycle.isShuttingDown)
        #expect(lifecycle.beginBackoff() == 0)
        let established = lifecycle.connected(FakeConnection("b"))
        #expect(established.reconnected)
        #expect(!established.failover)
        #expect(established.attempts == 2)
        #expect(lifecycle.generation == 2)
    }

    @Test("attempts move through the addresses; backoff grows per round; another node is a fail-over")
    func addresses() {
        var lifecycle = ConnectionLifecycle<FakeConnection>(addressCount: 3)
        _ = lifecycle.connected(FakeConnection("a"))
        #expect(lifecycle.addressIndex == 0)
        _ = lifecycle.lost()
        #expect(lifecycle.addressIndex == 1)
        var rounds: [Int] = [lifecycle.beginBackoff()]
        for _ in 0..<4 {
            lifecycle.attemptFailed()
            rounds.append(lifecycle.beginBackoff())
        }
        #expect(rounds == [0, 0, 0, 1, 1])
        #expect(lifecycle.addressIndex == 2)
        let established = lifecycle.connected(FakeConnection("b"))
        #expect(established.failover)
        #expect(established.attempts == 6)
        _ = lifecycle.lost()
        lifecycle.attemptFailed()
        lifecycle.attemptFailed()
        #expect(lifecycle.addressIndex == 2)
        #expect(!lifecycle.connected(FakeConnection("c")).failover, "back on the node of the last connection")
    }

    @Test("shutdown keeps the open connection for the drain, and finishing hands it over to close")
    func shutdownWhileOpen() {
        var lifecycle = ConnectionLifecycle<FakeConnection>(addressCount: 1)
        _ = lifecycle.connected(FakeConnection("a"))
        lifecycle.requestShutdown()
        lifecycle.requestShutdown()
        #expect(lifecycle.isShuttingDown)
        #expect(lifecycle.connection?.name == "a")
        #expect(lifecycle.finish()?.name == "a")
        guard case .closed = lifecycle.state else {
            Issue.record("not closed: \(lifecycle.state)")
            return
        }
        #expect(lifecycle.connection == nil)
    }

    @Test("a connection lost while closing is not replaced")
    func lostWhileClosing() {
        var lifecycle = ConnectionLifecycle<FakeConnection>(addressCount: 2)
        _ = lifecycle.connected(FakeConnection("a"))
        lifecycle.requestShutdown()
        #expect(lifecycle.lost().name == "a")
        #expect(lifecycle.isShuttingDown)
        #expect(lifecycle.connection == nil)
        #expect(lifecycle.beginBackoff() == 0)
        #expect(lifecycle.finish() == nil)
    }

    @Test("shutdown before any connection, and a start that fails, finish with nothing to close")
    func shutdownWhileConnecting() {
        var waiting = ConnectionLifecycle<FakeConnection>(addressCount: 1)
        waiting.attemptFailed()
        _ = waiting.beginBackoff()
        waiting.requestShutdown()
        #expect(waiting.isShuttingDown)
        #expect(waiting.finish() == nil)

        var failed = ConnectionLifecycle<FakeConnection>(addressCount: 1)
        failed.attemptFailed()
        #expect(failed.finish() == nil)
        #expect(failed.isShuttingDown)
    }
}
