import Foundation

/// A broadcast the mock accepted (answered 200), as it arrived.
public struct RecordedBroadcast: Sendable, Hashable {
    /// The bundle id the path named.
    public let bundleID: String
    public let channelID: String
    /// The `apns-request-id` answered: the one sent, or the one the mock made.
    public let requestID: String
    /// Request headers, lowercased names.
    public let headers: [String: String]
    public let payload: [UInt8]
    /// Which connection carried it, numbered from 1 in accept order.
    public let connection: Int

    public var pushType: String? { headers["apns-push-type"] }
    public var priority: String? { headers["apns-priority"] }
    public var expiration: String? { headers["apns-expiration"] }
}
