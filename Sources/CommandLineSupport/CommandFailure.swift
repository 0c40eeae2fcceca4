/// A failure whose message is meant for the operator as is; ArgumentParser prints it and exits 1.
public struct CommandFailure: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
