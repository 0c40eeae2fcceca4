import APNs
import APNsHTTP2
import PushWorker
import Synchronization

/// Stands in for APNs in the pipeline's tests: answers each device from a script (in order, then
/// 200 for ever) and records every request, so a test says what APNs does and sees what was sent.
final class ScriptedSender: NotificationSending {
    enum Answer: Sendable {
        case status(Int, APNsErrorReason?)
        case failure(APNsClientError)
    }

    let admission = AsyncSemaphore(limit: 8)
    private let state: Mutex<(script: [String: [Answer]], sent: [APNsRequest])>

    init(_ script: [String: [Answer]] = [:]) {
        state = Mutex((script, []))
    }

    var sent: [APNsRequest] { state.withLock { $0.sent } }

    func sendAdmitted(_ request: APNsRequest) async throws(APNsClientError) -> APNsResponse {
        let answer = state.withLock { state -> Answer in
            state.sent.append(request)
            guard var answers = state.script[request.deviceToken], !answers.isEmpty else { return .status(200, nil) }
            let next = answers.removeFirst()
            state.script[request.deviceToken] = answers
            return next
        }
        switch answer {
        case .status(let status, let reason): return APNsResponse(status: status, apnsID: "id-\(state.withLock { $0.sent.count })", reason: reason)
        case .failure(let error): throw error
        }
    }
}
