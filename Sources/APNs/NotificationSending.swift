/// One request's final answer: its index in the batch it was sent with, and APNs' response or why
/// there is none.
public typealias APNsAnswer = (index: Int, result: Result<APNsResponse, APNsClientError>)

/// The one way notifications leave: the pipeline sends through this, so its tests can stand a
/// scripted sender in for the HTTP/2 stack, and so it never imports the transport module.
/// `APNsClient` (APNsHTTP2) is the real one.
///
/// A batch, not a single request, is the primitive because a job's fan-out is: requests that
/// differ only in their device token share one encoding, and answers come back in waves on the
/// caller's task, so a notification costs no task of its own. A single send is a batch of one.
/// Bounding how many are in flight is the caller's business (`DeviceAdmission` in the worker):
/// the caller knows how long a device holds its slot, which is past APNs' answer.
public protocol NotificationSending: Sendable {
    /// Sends the requests and hands each one's final answer (by its index in `requests`) to
    /// `answers` on the calling task, a few at a time as they come. Each request gets exactly one
    /// answer; the call returns once all have had theirs.
    func send(_ requests: [APNsRequest], answers: ([APNsAnswer]) -> Void) async
}

extension NotificationSending {
    /// Sends one notification and returns APNs' answer, or why there is none.
    public func send(_ request: APNsRequest) async throws(APNsClientError) -> APNsResponse {
        try await send([request])[0].get()
    }

    /// Sends the requests and returns every answer, in the order given.
    public func send(_ requests: [APNsRequest]) async -> [Result<APNsResponse, APNsClientError>] {
        // A request without an answer would break the protocol's contract; it reads as a transport
        // failure rather than trapping the worker.
        var results = [Result<APNsResponse, APNsClientError>](repeating: .failure(.transport("no answer from the sender")), count: requests.count)
        await send(requests) { answers in
            for (index, result) in answers { results[index] = result }
        }
        return results
    }
}
