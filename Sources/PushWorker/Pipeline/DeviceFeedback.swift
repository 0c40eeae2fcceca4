import APNs
import Foundation

/// Told of each device APNs rejected for good (`APNsErrorReason.deviceFate`), so a registry stops
/// resolving dead devices.
public protocol DeviceFeedback: Sendable {
    /// Whether the device was removed or marked invalid (the summary counts them).
    func deviceRejected(app: String, token: String, reason: APNsErrorReason, at timestamp: Date?) async -> Bool
}
