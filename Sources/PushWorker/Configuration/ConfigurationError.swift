/// A configuration that cannot be used, naming the file and the key, never a secret's value.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let file: String
    /// Dotted path such as `apps[0].token.key_id`.
    public let key: String
    public let problem: String

    public init(file: String, key: String, _ problem: String) {
        self.file = file
        self.key = key
        self.problem = problem
    }

    public var description: String {
        key.isEmpty ? "\(file): \(problem)" : "\(file): \(key): \(problem)"
    }
}
