import APNs
import APNsHTTP2

/// What the pipeline needs of an APNs client: the JobPipeline sends through this, so its tests
/// can stand a scripted sender in for the HTTP/2 stack. `APNsClient` is the real one.
public protocol NotificationSending: Sendable {
    /// The bound on notifications in flight, the one admission gate: the pipeline takes a slot
    /// before it starts a device's task (so waiting devices cost no task and no memory), and then
    /// sends with `sendAdmitted`, which takes none.
    var admission: AsyncSemaphore { get }

    /// Sends one notification whose caller holds an admission slot; APNs' answer, or why there
    /// is none.
    func sendAdmitted(_ request: APNsRequest) async throws(APNsClientError) -> APNsResponse

    /// Sends many notifications whose caller holds a slot for each, and hands each one's final
    /// answer (by its index in `requests`) to `answers` on the calling task, a few at a time as
    /// they come. The pipeline hands a job's devices over this way.
    func sendAdmitted(_ requests: [APNsRequest], answers: ([APNsClient.Answer]) -> Void) async
}

extension NotificationSending {
    /// One `sendAdmitted` per request, all at once, each answer handed on as it comes: for
    /// senders with no batch path of their own.
    public func sendAdmitted(_ requests: [APNsRequest], answers: ([APNsClient.Answer]) -> Void) async {
        await withTaskGroup(of: APNsClient.Answer.self) { group in
            for (index, request) in requests.enumerated() {
                group.addTask {
                    do throws(APNsClientError) { return (index, .success(try await sendAdmitted(request))) } catch { return (index, .failure(error)) }
                }
            }
            for await answer in group { answers([answer]) }
        }
    }
}

extension APNsClient: NotificationSending {}
