/// Why a job was refused: a stable machine-readable code (the `x-pushworker-error` header of the
/// dead letter) and a sentence naming the field (`x-pushworker-error-message`).
public struct JobError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// Not UTF-8 JSON, not an object, or nested too deeply.
        case invalidJSON = "invalid_json"
        /// A required field is absent.
        case missingField = "missing_field"
        /// A field has the wrong type or a value outside its range, or is unknown.
        case invalidField = "invalid_field"
        /// `app` names no configured app, or is absent while several are configured.
        case unknownApp = "unknown_app"
        /// `audience` names no tokens, users or groups field at all.
        case emptyAudience = "empty_audience"
        /// A device token is not hex of a plausible length.
        case invalidToken = "invalid_token"
        /// The payload is over APNs' limit for the push type.
        case payloadTooLarge = "payload_too_large"
        /// The payload breaks a rule of its push type that APNs does not enforce but delivery
        /// depends on: an alert or background push with no `aps`, a background push with
        /// `alert`/`sound`/`badge`, `mutable-content` with no alert.
        case invalidPayload = "invalid_payload"
        /// Not a refusal: `audience.users` or `audience.groups` name recipients this worker
        /// cannot resolve (no registry). The job's tokens are still sent; the summary says so.
        case unresolvedAudience = "unresolved_audience"
    }

    public let code: Code
    /// The field at fault as the job contract spells it (`audience.tokens[2]`), or nil.
    public let field: String?
    public let message: String

    public init(_ code: Code, field: String?, _ message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
