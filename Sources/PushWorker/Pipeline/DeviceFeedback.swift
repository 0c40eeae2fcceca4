import APNs
import Foundation

/// Told of each device APNs rejected for good, so a registry stops resolving dead devices: an
/// APNs 410 removes the device, `BadDeviceToken` and `DeviceTokenNotForTopic` mark it invalid.
public protocol DeviceFeedback: Sendable {
    /// Whether the device was removed or marked invalid (the summary counts them).
    func deviceRejected(app: String, token: String, reason: APNsErrorReason, at timestamp: Date?) async -> Bool
}

extension APNsErrorReason {
    /// The reasons that say a device will never take this app's notifications again.
    var meansDeadDevice: Bool {
        switch self {
        case .unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic: true
        default: false
        }
    }
}
