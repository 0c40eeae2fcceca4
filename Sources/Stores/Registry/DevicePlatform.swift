import APNs
import FCM

/// The push service a device is reached through: APNs (iPhones, iPads, Macs) or FCM (Android).
public enum DevicePlatform: String, Sendable, Hashable, Codable, CaseIterable {
    case apns, fcm
}

extension DevicePlatform {
    /// The platform a token's form tells: an FCM registration token (base64url with a colon, or
    /// a pre-2018 `APA91b` one) is FCM's; anything else is taken for APNs' hex.
    public init(ofToken token: String) {
        self = FCMRegistrationToken.problem(token) == nil ? .fcm : .apns
    }
}

extension DevicePlatform {
    /// A device token as the registry and the ledger keep it: an FCM registration token as it is
    /// (case matters in it), an APNs token normalised (`<3F1C 0E5D …>` as apps log it is `3f1c0e5d…`).
    public static func normalized(token: String) -> String {
        DevicePlatform(ofToken: token) == .fcm ? token : APNsDeviceToken.normalized(token)
    }
}
