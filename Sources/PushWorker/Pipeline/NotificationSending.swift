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

    /// Sends many notifications whose caller holds a slot for each; each one's answer, or why
    /// there is none, in the order given. The pipeline hands a job's devices over this way.
    func sendAdmitted(_ requests: [APNsRequest]) async -> [Result<APNsResponse, APNsClientError>]
}

extension NotificationSending {
    /// One `sendAdmitted` per request, all at once: for senders with no batch path of their own.
    public func sendAdmitted(_ requests: [APNsRequest]) async -> [Result<APNsResponse, APNsClientError>] {
        await withTaskGroup(of: (Int, Result<APNsResponse, APNsClientError>).self) { group in
            for (index, request) in requests.enumerated() {
                group.addTask {
                    do throws(APNsClientError) { return (index, .success(try await sendAdmitted(request))) } catch { return (index, .failure(error)) }
                }
            }
            var results = [Result<APNsResponse, APNsClientError>?](repeating: nil, count: requests.count)
            for await (index, result) in group { results[index] = result }
            return results.map { $0! }
        }
    }
}

extension APNsClient: NotificationSending {}
