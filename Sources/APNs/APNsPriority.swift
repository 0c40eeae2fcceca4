/// The `apns-priority` header.
public enum APNsPriority: Int, Sendable, Hashable, CaseIterable, Codable {
    /// Deliver at once (alerts, sounds, badges).
    case immediate = 10
    /// Deliver when it saves the device power; required for background pushes.
    case conservePower = 5
    /// Lowest; APNs may delay or group the notification.
    case low = 1

    public init(validating value: Int) throws(APNsValidationError) {
        guard let priority = APNsPriority(rawValue: value) else {
            throw APNsValidationError(field: "priority", "priority \(value) is not one APNs accepts; expected 10, 5 or 1")
        }
        self = priority
    }
}
