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
