import APNs
import PushWorker
import Synchronization

/// Stands in for APNs in the pipeline's tests: answers each device from a script (in order, then
/// 200 for ever) and records every request, so a test says what APNs does and sees what was sent.
final class ScriptedSender: OwnedNotificationSender {
    enum Answer: Sendable {
        case status(Int, APNsErrorReason?)
        case failure(APNsClientError)
    }

    private let state: Mutex<(script: [String: [Answer]], sent: [APNsRequest])>

    init(_ script: [String: [Answer]] = [:]) {
        state = Mutex((script, []))
    }

    var sent: [APNsRequest] { state.withLock { $0.sent } }

    // What the worker reads and closes (`OwnedNotificationSender`): a script holds no connection.
    var requestsInFlight: Int { 0 }
    var openConnections: Int { 0 }
    func shutdown() {}

    /// Answers every request at once, in one wave.
    func send(_ requests: [APNsRequest], answers: ([APNsAnswer]) -> Void) async {
        let scripted = state.withLock { state in
            requests.map { request -> (Answer, Int) in
                state.sent.append(request)
                guard var answers = state.script[request.deviceToken], !answers.isEmpty else { return (.status(200, nil), state.sent.count) }
                let next = answers.removeFirst()
                state.script[request.deviceToken] = answers
                return (next, state.sent.count)
            }
        }
        answers(scripted.enumerated().map { index, scripted in
            switch scripted.0 {
            case .status(let status, let reason): (index, .success(APNsResponse(status: status, apnsID: "id-\(scripted.1)", reason: reason)))
            case .failure(let error): (index, .failure(error))
            }
        })
    }
}
