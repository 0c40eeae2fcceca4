/// A sender the worker owns for the life of the process: it reads the sender's load into its
/// gauges and closes it when the worker stops. `APNsClient` (APNsHTTP2) is the real one.
public protocol OwnedNotificationSender: NotificationSending {
    /// Requests sent and not yet answered.
    var requestsInFlight: Int { get }
    /// Connections to APNs now open.
    var openConnections: Int { get }
    /// Finishes the requests in flight, then closes the connections.
    func shutdown()
}
