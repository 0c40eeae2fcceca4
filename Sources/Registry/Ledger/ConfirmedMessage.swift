/// A `results: batched` message the broker confirmed: the records packed in it need no second
/// publish when their job comes back. Kept beside the records for as long as they are.
public struct ConfirmedMessage: Sendable, Hashable {
    public var jobID: String
    /// The message's id, as its records carry it (`DeliveryRecord.resultsMessage`).
    public var message: Int64
    /// When it was confirmed, milliseconds since 1970: retention drops it with its day.
    public var at: Int64

    public init(jobID: String, message: Int64, at: Int64) {
        self.jobID = jobID
        self.message = message
        self.at = at
    }
}
