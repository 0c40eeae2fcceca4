import CNGHTTP2

/// One request handed to the nghttp2 engine: the caller's continuation, resumed by the engine's
/// completion with Swift copies of what the C result points to (valid only during the call).
/// The continuation is unchecked: the engine completes each request exactly once (its tests
/// count every answer), and a checked one costs an allocation per notification.
final class NGHTTP2Exchange: Sendable {
    private let baseURL: String
    private let continuation: UnsafeContinuation<APNsExchangeOutcome, Never>

    init(baseURL: String, continuation: UnsafeContinuation<APNsExchangeOutcome, Never>) {
        self.baseURL = baseURL
        self.continuation = continuation
    }

    func finish(_ outcome: APNsExchangeOutcome) {
        continuation.resume(returning: outcome)
    }

    func complete(_ result: pw_h2_result) {
        guard result.error != PW_H2_OK else {
            let body = result.body_length > 0 ? Array(UnsafeBufferPointer(start: result.body, count: result.body_length)) : []
            finish(.response(
                status: Int(result.status), apnsID: result.apns_id.map { String(cString: $0) },
                apnsUniqueID: result.apns_unique_id.map { String(cString: $0) }, body: body))
            return
        }
        let message = String(cString: result.message)
        let error: APNsClientError
        switch result.error {
        case PW_H2_ERR_TIMEOUT: error = .timeout("no answer from \(baseURL): \(message)")
        case PW_H2_ERR_CREDENTIALS: error = .credentials(message)
        case PW_H2_ERR_VERIFY: error = .transport("TLS verification of \(baseURL) failed: \(message)")
        default: error = .transport("\(baseURL): \(message)")
        }
        finish(.failure(error, retry: result.retry != 0))
    }
}
