import Foundation

/// A notification the mock accepted (answered 200), as it arrived.
public struct RecordedNotification: Sendable, Hashable {
    public let token: String
    public let apnsID: String
    /// Request headers, lowercased names, in arrival order.
    public let headers: [String: String]
    public let payload: [UInt8]
    /// Which connection carried it, numbered from 1 in accept order.
    public let connection: Int
    /// Requests open on that connection when this one arrived, itself included: shows the
    /// stream limit at work.
    public let concurrentStreams: Int

    public var topic: String? { headers["apns-topic"] }
    public var pushType: String? { headers["apns-push-type"] }
    public var priority: String? { headers["apns-priority"] }
    public var expiration: String? { headers["apns-expiration"] }
    public var collapseID: String? { headers["apns-collapse-id"] }
}
