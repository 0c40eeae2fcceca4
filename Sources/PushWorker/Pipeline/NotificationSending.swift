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
}

extension APNsClient: NotificationSending {}
