import FCM
import FCMHTTP2

/// What the pipeline asks of an app's FCM side: one message to many devices, one answer each.
/// `FCMClient` in the worker; a test may stand in.
public protocol FCMSending: Sendable {
    /// Each device's answer, and its re-sends after a lost connection (which its attempts count).
    func replies(_ message: FCMMessage.Encoded, to devices: [String]) async -> [FCMClient.Reply]
    /// Finishes the requests in flight, then closes the connections.
    func shutdown()
    /// Requests sent and not yet answered, and connections open (the gauges).
    var requestsInFlight: Int { get }
    var openConnections: Int { get }
}

extension FCMClient: FCMSending {}
