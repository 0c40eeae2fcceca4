/// A request that must not be sent, naming the field at fault so the job's author can fix it.
public struct APNsValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The field as the job contract names it (`payload`, `collapse_id`, `priority`, `token`…).
    public let field: String
    public let message: String

    public init(field: String, _ message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { message }
}
