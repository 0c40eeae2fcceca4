import Foundation

/// What an FCM error answer means for the device and the sender, read from FCM's `ErrorCode`
/// (the `FcmError` detail's `errorCode`, else the answer's status) and its details.
public enum FCMFailure: Sendable, Equatable {
    /// `UNREGISTERED` (404): the app was uninstalled or the token lapsed; the device is removed,
    /// as after APNs' 410.
    case unregistered
    /// `INVALID_ARGUMENT` about the token (an `FcmError` detail, or a `BadRequest` naming
    /// `message.token`): this device's token is bad; rejected.
    case invalidToken(String)
    /// `INVALID_ARGUMENT` about the message (a `BadRequest` naming another field): the job is
    /// wrong for every device; rejected, naming FCM's field.
    case invalidMessage(field: String?, String)
    /// `SENDER_ID_MISMATCH` (403): the token belongs to another Firebase project; rejected.
    case senderIDMismatch
    /// `QUOTA_EXCEEDED` (429): the project's, the device's or the topic's rate; retried, not
    /// before `retryAfter` (at least a minute, as Google asks for a project's quota).
    case quotaExceeded(retryAfter: TimeInterval)
    /// `UNAVAILABLE` (503) or `INTERNAL` (500): retried after `retryAfter` when FCM gave one.
    case unavailable(retryAfter: TimeInterval?)
    /// `THIRD_PARTY_AUTH_ERROR` or an access token refused (401): the app's credentials are
    /// wrong; an alarm, not a retry.
    case credentials(code: String, String)
    /// Anything else FCM answered; rejected with its status and code.
    case other(status: Int, code: String?, String)

    /// The least Google asks a sender to wait after a project's quota error.
    public static let quotaPause: TimeInterval = 60

    /// Reads an answer other than 200: its status, `Retry-After` (seconds) and body.
    public init(status: Int, retryAfter: String?, body: some DataProtocol) {
        let error = (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["error"] as? [String: Any]
        let message = error?["message"] as? String ?? "HTTP \(status)"
        let details = error?["details"] as? [[String: Any]] ?? []
        let fcmCode = details.first { ($0["@type"] as? String)?.hasSuffix("google.firebase.fcm.v1.FcmError") == true }?["errorCode"] as? String
        let violations = details.filter { ($0["@type"] as? String)?.hasSuffix("google.rpc.BadRequest") == true }
            .flatMap { $0["fieldViolations"] as? [[String: Any]] ?? [] }
        let code = fcmCode ?? Self.code(ofStatus: error?["status"] as? String, http: status)
        let pause = Self.seconds(retryAfter)
        switch code {
        // A device is called gone, or another project's, only on FCM's own word (its `FcmError`
        // detail): a bare 404 is a gateway's wrong path, a bare 403 a wrong project_id or a
        // missing role, and either would otherwise condemn every device of the app.
        case "UNREGISTERED" where fcmCode != nil:
            self = .unregistered
        case "SENDER_ID_MISMATCH" where fcmCode != nil:
            self = .senderIDMismatch
        case "PERMISSION_DENIED", "SENDER_ID_MISMATCH":
            self = .credentials(code: "PERMISSION_DENIED", message)
        case "INVALID_ARGUMENT":
            let fields = violations.compactMap { $0["field"] as? String }
            if fields.contains("message.token") || (fields.isEmpty && message.lowercased().contains("registration token")) {
                self = .invalidToken(message)
            } else if let violation = violations.first(where: { ($0["field"] as? String) != nil }), let field = violation["field"] as? String {
                self = .invalidMessage(field: field, violation["description"] as? String ?? message)
            } else {
                self = .invalidMessage(field: nil, message)
            }
        case "QUOTA_EXCEEDED":
            self = .quotaExceeded(retryAfter: max(pause ?? 0, Self.quotaPause))
        case "UNAVAILABLE", "INTERNAL":
            self = .unavailable(retryAfter: pause)
        case "THIRD_PARTY_AUTH_ERROR", "UNAUTHENTICATED":
            self = .credentials(code: code ?? "UNAUTHENTICATED", message)
        default:
            // A gateway's 502 or 504, say: FCM's own trouble, tried again.
            self = (500...599).contains(status) ? .unavailable(retryAfter: pause) : .other(status: status, code: code, message)
        }
    }

    /// `Retry-After` in seconds: a whole number of 0 to a day (a date, or anything else, is none).
    static func seconds(_ header: String?) -> TimeInterval? {
        guard let text = header?.trimmingCharacters(in: .whitespaces), !text.isEmpty, text.utf8.count <= 9,
            text.utf8.allSatisfy({ (48...57).contains($0) }), let value = Int(text)
        else { return nil }
        return TimeInterval(min(value, 86_400))
    }

    /// FCM's code for an answer without an `FcmError` detail, from its google.rpc status.
    private static func code(ofStatus status: String?, http: Int) -> String? {
        switch (status, http) {
        case ("NOT_FOUND", _), (nil, 404): "NOT_FOUND"
        case ("INVALID_ARGUMENT", _), (nil, 400): "INVALID_ARGUMENT"
        case ("PERMISSION_DENIED", _), (nil, 403): "PERMISSION_DENIED"
        case ("RESOURCE_EXHAUSTED", _), (nil, 429): "QUOTA_EXCEEDED"
        case ("UNAVAILABLE", _), (nil, 503): "UNAVAILABLE"
        case ("INTERNAL", _), (nil, 500): "INTERNAL"
        case ("UNAUTHENTICATED", _), (nil, 401): "UNAUTHENTICATED"
        default: status
        }
    }

    /// The reason a result carries, in FCM's words.
    public var reason: String {
        switch self {
        case .unregistered: "UNREGISTERED"
        case .invalidToken: "INVALID_ARGUMENT"
        case .invalidMessage: "INVALID_ARGUMENT"
        case .senderIDMismatch: "SENDER_ID_MISMATCH"
        case .quotaExceeded: "QUOTA_EXCEEDED"
        case .unavailable: "UNAVAILABLE"
        case .credentials(let code, _): code
        case .other(_, let code, _): code ?? "UNKNOWN"
        }
    }

    /// FCM's own words, or what the code means when it gave none.
    public var detail: String {
        switch self {
        case .unregistered: "the app was uninstalled or the token lapsed: the device is gone"
        case .invalidToken(let message), .credentials(_, let message), .other(_, _, let message): message
        case .invalidMessage(let field, let message): field.map { "\($0): \(message)" } ?? message
        case .senderIDMismatch: "the token belongs to another Firebase project"
        case .quotaExceeded(let pause): "over FCM's quota; not before \(Int(pause)) s"
        case .unavailable(let pause): pause.map { "FCM is unavailable; not before \(Int($0)) s" } ?? "FCM is unavailable"
        }
    }

    /// The HTTP status FCM answered with.
    public var status: Int {
        switch self {
        case .unregistered: 404
        case .invalidToken, .invalidMessage: 400
        case .senderIDMismatch: 403
        case .quotaExceeded: 429
        case .unavailable: 503
        case .credentials: 401
        case .other(let status, _, _): status
        }
    }

    /// Whether sending the same message again later may succeed.
    public var isRetryable: Bool {
        switch self {
        case .quotaExceeded, .unavailable: true
        default: false
        }
    }
}
