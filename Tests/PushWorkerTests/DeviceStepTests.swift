import APNs
import Testing

@testable import PushWorker

/// The per-device rule by table: each answer APNs (or the client) can give, at each point of the
/// retry budget, and what the pipeline must do next.
@Suite("DeviceStep: answer → next action")
struct DeviceStepTests {
    static func response(_ status: Int, _ reason: APNsErrorReason? = nil) -> Result<APNsResponse, APNsClientError> {
        .success(APNsResponse(status: status, apnsID: "id", reason: reason))
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var answer: Result<APNsResponse, APNsClientError>
        var attempts = 1
        var previousAttempts = 0
        var expected: DeviceStep
        var testDescription: String { "\(answer) after \(attempts) (\(previousAttempts) before) → \(expected)" }
    }

    /// 3 attempts in all, 2 of them in one worker.
    static let policy = RetryPolicy(maxAttempts: 3, inProcessAttempts: 2)

    static let rows: [Row] = [
        Row(answer: response(200), expected: .finish(.delivered)),
        Row(answer: response(200), attempts: 3, expected: .finish(.delivered)),
        // Rejections for good; the dead-device ones name their reason for the registry.
        Row(answer: response(400, .badTopic), expected: .finish(.rejected)),
        Row(answer: response(400, .badDeviceToken), expected: .finish(.rejected, deadDevice: .badDeviceToken)),
        Row(answer: response(400, .deviceTokenNotForTopic), expected: .finish(.rejected, deadDevice: .deviceTokenNotForTopic)),
        Row(answer: response(410, .unregistered), expected: .finish(.rejected, deadDevice: .unregistered)),
        Row(answer: response(410, .expiredToken), expected: .finish(.rejected, deadDevice: .expiredToken)),
        Row(answer: response(403, .invalidProviderToken), expected: .finish(.rejected)),
        // A reason this client does not know: the status decides.
        Row(answer: response(404), expected: .finish(.rejected)),
        Row(answer: response(502), expected: .retry),
        // Transient refusals: retried here, then handed on, then failed.
        Row(answer: response(429, .tooManyRequests), expected: .retry),
        Row(answer: response(503, .serviceUnavailable), attempts: 2, expected: .handOn),
        Row(answer: response(500, .internalServerError), attempts: 3, previousAttempts: 2, expected: .finish(.failed)),
        Row(answer: response(429, .tooManyRequests), attempts: 2, previousAttempts: 1, expected: .retry),
        // Answers the client passes on after its own retries ran out.
        Row(answer: response(403, .expiredProviderToken), expected: .retry),
        Row(answer: response(503, .shutdown), attempts: 3, expected: .finish(.failed)),
        // No answer.
        Row(answer: .failure(.timeout("t")), expected: .retry),
        Row(answer: .failure(.transport("reset")), attempts: 2, expected: .handOn),
        Row(answer: .failure(.credentials("bad key")), expected: .finish(.failed)),
        Row(answer: .failure(.shutdown), expected: .finish(.failed)),
        Row(answer: .failure(.invalidRequest(APNsValidationError(field: "payload", "payload is 5000 bytes"))), expected: .finish(.rejected)),
    ]

    @Test("the next step", arguments: rows)
    func step(_ row: Row) {
        #expect(DeviceStep.after(row.answer, attempts: row.attempts, previousAttempts: row.previousAttempts, policy: Self.policy) == row.expected)
    }
}
