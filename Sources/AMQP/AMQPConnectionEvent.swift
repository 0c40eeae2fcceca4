/// A change of a connection's state, told to `AMQPConfiguration.onConnectionEvent` so the process
/// around it can answer readiness checks and count reconnects without polling the I/O thread.
public enum AMQPConnectionEvent: Sendable {
    /// Connected to `address` and the topology declared; `reconnected` is false for the first
    /// connection, `failover` true when the previous connection was to another address.
    case connected(reconnected: Bool, address: AMQPAddress, failover: Bool)
    /// An established connection was lost; reconnecting follows.
    case lost(AMQPError)
    /// A connection attempt failed (the broker not reachable yet, or not again yet).
    case attemptFailed(AMQPError)
}
