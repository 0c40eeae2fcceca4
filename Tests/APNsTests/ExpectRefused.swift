import APNs
import Testing

/// `request` is refused by `validate()` naming `field`, with `message` in its sentence.
func expectRefused(_ request: APNsRequest, field: String, message: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        try request.validate()
        Issue.record("accepted \(name)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.field == field, sourceLocation: sourceLocation)
        #expect(error.message.contains(message), "\(error.message)", sourceLocation: sourceLocation)
    }
}
