/// Why a channel management call did not do what it asked.
public enum APNsChannelError: Error, Sendable, CustomStringConvertible {
    /// APNs answered, refusing: its status, its reason (nil when the body named none) and the
    /// `apns-request-id` to quote to Apple.
    case rejected(status: Int, reason: APNsErrorReason?, requestID: String?)
    /// No usable answer: connecting, TLS, HTTP/2, a timeout, or an answer of the wrong shape.
    case transport(String)
    /// The provider token cannot be signed, or the client certificate cannot be used.
    case credentials(String)
    /// Refused before sending (a channel id that is not base64, an empty bundle id).
    case invalidRequest(APNsValidationError)

    public var description: String {
        switch self {
        case .rejected(let status, let reason, let requestID):
            let named = reason.map { "\($0.rawValue) (\(status))" } ?? "status \(status) without a reason"
            let meaning = reason.flatMap(Self.meaning).map { ": \($0)" } ?? ""
            let id = requestID.map { " [apns-request-id \($0)]" } ?? ""
            return "APNs refused the channel request with \(named)\(meaning)\(id)"
        case .transport(let message): return "channel management transport error: \(message)"
        case .credentials(let message): return "unusable credentials: \(message)"
        case .invalidRequest(let error): return "invalid channel request: \(error)"
        }
    }

    /// What the channel reasons mean, in Apple's words, so an operator need not look them up.
    private static func meaning(_ reason: APNsErrorReason) -> String? {
        switch reason {
        case .missingChannelId: "no channel id was sent"
        case .badChannelId: "the channel id is not properly base64-encoded, or too long"
        case .channelNotRegistered: "the channel does not exist"
        case .cannotCreateChannelConfig: "the app has reached its maximum number of channels"
        case .invalidPushType: "the push type must be LiveActivity"
        case .missingPushType: "no push type was sent"
        case .featureNotEnabled: "broadcast push is not enabled for this app"
        case .badPath: "no such management endpoint"
        case .methodNotAllowed: "the method is not allowed on this endpoint"
        case .expiredProviderToken: "the provider token has expired"
        case .invalidProviderToken, .missingProviderToken, .forbidden: "the credentials were not accepted"
        case .tooManyRequests: "too many requests; try again later"
        case .internalServerError, .serviceUnavailable: "APNs' trouble; try again later"
        default: nil
        }
    }
}
