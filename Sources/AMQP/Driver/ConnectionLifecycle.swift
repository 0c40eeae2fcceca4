/// Where a driver's connection is in its life, with the only ways it may move on, in the manner
/// of swift-kafka-client's `KafkaConsumer.StateMachine`.
///
/// The driver used to spell this out in loose variables (an optional handle, a shutdown flag, an
/// attempt counter, the generation), and which combinations could happen was left to the reader:
/// a handle while shut down? attempts counted while connected? One enum makes those
/// combinations unrepresentable, and each transition checks it starts from a state it may
/// start from, so a loop that goes wrong stops at once instead of publishing on a dead handle.
///
/// Generic over the connection so the transitions can be tested without a broker; the driver
/// uses `ConnectionHandle`. No I/O: the driver does what a transition returns.
struct ConnectionLifecycle<Connection> {
    enum State {
        /// No connection is up: before the first, or after one was lost. `attempt` counts the
        /// attempts that failed since the last connection came up (or since start).
        case connecting(attempt: Int)
        /// The connection carries traffic.
        case open(Connection)
        /// Shutdown was asked for: what is queued still goes out on the connection, if there is
        /// one, and then the driver finishes. Nothing reconnects any more.
        case closing(Connection?)
        /// Everything pending has been failed and the connection closed: the I/O thread is done.
        case closed
    }

    /// What the driver reports when a connection comes up.
    struct Established {
        /// Attempts it took, this one included.
        var attempts: Int
        /// Not the first connection of this driver.
        var reconnected: Bool
        /// Up on another address than the last connection: another node of the cluster.
        var failover: Bool
    }

    private(set) var state: State = .connecting(attempt: 0)
    /// Numbers the connections that came up, from 1. A delivery's tag means something only on the
    /// connection it came from, so a settlement carries the generation and is checked against it.
    private(set) var generation: UInt64 = 0
    /// The address the next attempt goes to; moved past one that failed or whose connection was
    /// lost, since its node may be gone.
    private(set) var addressIndex = 0
    /// The address of the last connection that came up, to tell a fail-over from a reconnect.
    private var connectedIndex: Int?
    private let addressCount: Int

    init(addressCount: Int) {
        precondition(addressCount > 0, "a connection needs an address")
        self.addressCount = addressCount
    }

    /// The connection to work on: open, or closing with one.
    var connection: Connection? {
        switch state {
        case .open(let connection): connection
        case .closing(let connection): connection
        case .connecting, .closed: nil
        }
    }

    /// Shutdown has been asked for (or is done): the loop ends and nothing reconnects.
    var isShuttingDown: Bool {
        switch state {
        case .closing, .closed: true
        case .connecting, .open: false
        }
    }

    /// The attempts that failed since the last connection came up; 0 unless connecting.
    var failedAttempts: Int {
        if case .connecting(let attempt) = state { attempt } else { 0 }
    }

    /// An attempt succeeded: `connection` is up, on the current address.
    mutating func connected(_ connection: Connection) -> Established {
        guard case .connecting(let attempt) = state else {
            preconditionFailure("a connection came up while \(state)")
        }
        generation += 1
        let failover = connectedIndex.map { $0 != addressIndex } ?? false
        connectedIndex = addressIndex
        state = .open(connection)
        return Established(attempts: attempt + 1, reconnected: generation > 1, failover: failover)
    }

    /// An attempt failed: the next one goes to the next address. Counted by `beginBackoff()`.
    mutating func attemptFailed() {
        guard case .connecting = state else {
            preconditionFailure("a connection attempt failed while \(state)")
        }
        moveToNextAddress()
    }

    /// The connection died. Returns it, to be marked broken. While closing there is nothing to
    /// reconnect to; otherwise connecting starts over at attempt 0, on the next address.
    mutating func lost() -> Connection {
        switch state {
        case .open(let connection):
            state = .connecting(attempt: 0)
            moveToNextAddress()
            return connection
        case .closing(let connection?):
            state = .closing(nil)
            moveToNextAddress()
            return connection
        case .connecting, .closing(nil), .closed:
            preconditionFailure("a connection was lost while \(state)")
        }
    }

    /// Before waiting to reconnect: the round of the backoff (attempts over all addresses, so a
    /// cluster with one node down fails over at the shortest delay), and one attempt more.
    mutating func beginBackoff() -> Int {
        switch state {
        case .connecting(let attempt):
            state = .connecting(attempt: attempt + 1)
            return attempt / addressCount
        case .closing(nil):
            // Lost while closing: the loop ends after this wait.
            return 0
        case .open, .closing(.some), .closed:
            preconditionFailure("a reconnect wait began while \(state)")
        }
    }

    /// Shutdown was asked for; asking again changes nothing.
    mutating func requestShutdown() {
        switch state {
        case .connecting: state = .closing(nil)
        case .open(let connection): state = .closing(connection)
        case .closing, .closed: break
        }
    }

    /// The end: returns the connection still up, to be closed.
    mutating func finish() -> Connection? {
        if case .closed = state { preconditionFailure("finished twice") }
        let connection = self.connection
        state = .closed
        return connection
    }

    private mutating func moveToNextAddress() {
        addressIndex = (addressIndex + 1) % addressCount
    }
}
