/// A broadcast channel's `message-storage-policy`: whether APNs keeps the latest broadcast for a
/// device that is offline when it is sent. Fixed when the channel is created.
public enum APNsChannelStoragePolicy: Int, Sendable, Hashable, Codable, CaseIterable {
    /// Nothing is kept: a device offline at the moment misses the broadcast. APNs refuses a
    /// non-zero `apns-expiration` for such a channel (BadExpirationDate).
    case noMessageStored = 0
    /// The most recent broadcast is kept until it expires.
    case mostRecentMessageStored = 1

    /// The name command lines and JSON use: `none` or `most_recent`.
    public var name: String {
        switch self {
        case .noMessageStored: "none"
        case .mostRecentMessageStored: "most_recent"
        }
    }

    /// Parses `none` or `most_recent` (also the wire numbers `0` and `1`).
    public init?(name: String) {
        switch name {
        case "none", "0": self = .noMessageStored
        case "most_recent", "1": self = .mostRecentMessageStored
        default: return nil
        }
    }
}
