/// A failure whose message is meant for the operator as is; ArgumentParser prints it and exits 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
