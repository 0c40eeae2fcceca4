/// Why a command to the stores was refused (a registry command, `cancel_job`), or a store (the
/// registry, the ledger, the schedule) could not serve: a stable code (the reply's `error.code`,
/// the dead letter's `x-pushworker-error`) and a sentence naming the field. One type for the
/// three stores, because a command's reply carries whichever of them refused it.
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// Not a JSON object.
        case invalidJSON = "invalid_json"
        /// `command` names no command this worker knows.
        case unknownCommand = "unknown_command"
        /// A field the command needs is absent.
        case missingField = "missing_field"
        /// A field has the wrong type or an impossible value, or is not a field of the command.
        case invalidField = "invalid_field"
        /// `add_to_group` with `create_group: false` named a group that does not exist.
        case unknownGroup = "unknown_group"
        /// Preferences named a device (`app` and `token`) that is not registered.
        case unknownDevice = "unknown_device"
        /// `registry.auth` is on and the command's `auth` token does not speak for the user it
        /// concerns (missing, expired, another user's, not signed by a configured key).
        case unauthorized = "unauthorized"
        /// The command would register a device for an app this worker does not serve: no job
        /// could reach it.
        case unknownApp = "unknown_app"
        /// APNs refused a channel request (`ChannelNotRegistered`, `CannotCreateChannelConfig`…);
        /// the message names APNs' reason.
        case apnsRejected = "apns_rejected"
        /// APNs could not be reached for a channel request, or answered with its own trouble
        /// (429, 5xx); asked again later, it may succeed. Answered, not requeued.
        case apnsUnavailable = "apns_unavailable"
        /// `cancel_job` named no job held in the schedule.
        case unknownJob = "unknown_job"
        /// `cancel_job` named a job released (or cancelled) already.
        case jobEnded = "job_ended"
        /// The store could not be read or written; the command may succeed later.
        case storeUnavailable = "store_unavailable"
    }

    public let code: Code
    public let field: String?
    public let message: String

    public init(_ code: Code, field: String? = nil, _ message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// Preferences named a device that is not registered.
    public static func unknownDevice(app: String, token: String) -> StoreError {
        StoreError(.unknownDevice, field: "token", "device \(app) \(token) is not registered: register it before setting its preferences")
    }
}
