/// The `apns-push-type` header: what kind of notification this is, which decides the topic
/// suffix APNs expects, the payload limit and the allowed priorities.
public enum APNsPushType: String, Sendable, Hashable, CaseIterable, Codable {
    case alert, background, voip, complication, fileprovider, mdm, liveactivity, location, pushtotalk, widgets, controls

    /// Parses a push type, with an error that lists the valid ones.
    public init(validating text: String) throws(APNsValidationError) {
        guard let type = APNsPushType(rawValue: text) else {
            throw APNsValidationError(
                field: "push_type",
                "unknown push type '\(text)'; expected one of \(APNsPushType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self = type
    }

    /// The largest payload APNs accepts for this type, in bytes.
    public var payloadLimit: Int {
        self == .voip ? 5120 : 4096
    }

    /// The suffix APNs requires on the topic (bundle id) for this type, if any.
    public var requiredTopicSuffix: String? {
        switch self {
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .liveactivity: ".push-type.liveactivity"
        case .location: ".location-query"
        case .pushtotalk: ".voip-ptt"
        default: nil
        }
    }

    /// The priority used when the job names none: background pushes must not wake the device at
    /// once, so APNs refuses them at 10.
    public var defaultPriority: APNsPriority {
        self == .background ? .conservePower : .immediate
    }
}
