/// Why a document was refused, and where: `offset` is the offending byte's, from 0 at the start
/// of the document.
public struct JSONStreamError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var offset: Int

    public init(_ message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }

    public var description: String { "\(message) (at byte \(offset))" }
}
