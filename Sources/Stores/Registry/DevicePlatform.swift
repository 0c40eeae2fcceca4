/// The push service a device is reached through: APNs (iPhones, iPads, Macs) or FCM (Android).
public enum DevicePlatform: String, Sendable, Hashable, Codable, CaseIterable {
    case apns, fcm
}
