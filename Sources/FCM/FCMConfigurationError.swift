/// Why a service account (or an FCM setting) cannot be used: the field it is about and a sentence
/// an operator can act on. Never carries the key itself.
public struct FCMConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The service account's field (`private_key`, `client_email`…), or nil for the file as a whole.
    public let field: String?
    public let message: String

    public init(field: String? = nil, _ message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { message }
}
