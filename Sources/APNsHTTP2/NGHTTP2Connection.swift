import APNs
import CNGHTTP2
import Foundation

/// The nghttp2 transport's connection (``APNsTransport/nghttp2``): a C engine (CNGHTTP2) that
/// owns the socket, the TLS session and the nghttp2 session on a thread of its own, and calls
/// back once per request. Nothing of Swift crosses into C but the ``APNsExchangeRound`` the
/// requests answer into, retained once per request and released by that request's completion.
final class NGHTTP2Connection: APNsConnection, @unchecked Sendable {
    /// nil when the engine could not start or the configuration cannot be served; every exchange
    /// then fails with `unusable`.
    private let handle: OpaquePointer?
    private let unusable: APNsClientError?

    init(configuration: APNsClientConfiguration) {
        var handle: OpaquePointer?
        var problem: APNsClientError?
        do {
            let endpoint = try NGHTTP2Endpoint(configuration: configuration)
            handle = endpoint.start { error in problem = .transport("cannot start the connection to \(configuration.baseURL): \(error)") }
        } catch {
            problem = error
        }
        self.handle = handle
        self.unusable = problem
    }

    deinit {
        if let handle { pw_h2_free(handle) }
    }

    var isOpen: Bool { handle.map { pw_h2_is_open($0) != 0 } ?? false }

    var keepalivePings: (sent: UInt64, answered: UInt64) {
        guard let handle else { return (0, 0) }
        return (pw_h2_pings_sent(handle), pw_h2_pings_answered(handle))
    }

    func start(_ batch: APNsExchangeBatch, round: APNsExchangeRound) {
        guard let handle else {
            for tag in batch.tags { round.complete(Int(tag), .failure(unusable ?? .shutdown, retry: false)) }
            return
        }
        // One retain of the round per request, each taken back by that request's completion.
        for _ in batch.tags { _ = Unmanaged.passRetained(round) }
        let context = Unmanaged.passUnretained(round).toOpaque()
        let queued = batch.paths.withUnsafeBufferPointer { paths in
            batch.tags.withUnsafeBufferPointer { tags in
                batch.headerBlock.withUnsafeBufferPointer { headers in
                    batch.body.withUnsafeBufferPointer { body in
                        paths.withMemoryRebound(to: CChar.self) { paths in
                            if let ends = batch.bodyEnds {
                                ends.withUnsafeBufferPointer { ends in
                                    pw_h2_submit_each(
                                        handle, tags.count, paths.baseAddress, tags.baseAddress, headers.baseAddress, headers.count,
                                        body.baseAddress, ends.baseAddress, context)
                                }
                            } else {
                                pw_h2_submit(
                                    handle, tags.count, paths.baseAddress, tags.baseAddress, headers.baseAddress, headers.count,
                                    body.baseAddress, body.count, context)
                            }
                        }
                    }
                }
            }
        }
        if queued != 0 {
            for tag in batch.tags {
                Unmanaged<APNsExchangeRound>.fromOpaque(context).release()
                round.complete(Int(tag), .failure(.shutdown, retry: false))
            }
        }
    }

    func shutdown() {
        if let handle { pw_h2_shutdown(handle) }
    }
}

/// Called by the engine on its thread, once per request: takes back the round's retain made at
/// submit, and hands it Swift copies of what the result points to (valid only during the call).
let nghttp2Completion: pw_h2_completion = { context, tag, result in
    guard let context, let result else { return }
    let round = Unmanaged<APNsExchangeRound>.fromOpaque(context).takeRetainedValue()
    round.complete(Int(tag), APNsExchangeOutcome(result.pointee, baseURL: round.baseURL))
}

extension APNsExchangeOutcome {
    init(_ result: pw_h2_result, baseURL: String) {
        guard result.error != PW_H2_OK else {
            let body = result.body_length > 0 ? Array(UnsafeBufferPointer(start: result.body, count: result.body_length)) : []
            self = .response(
                status: Int(result.status), apnsID: result.apns_id.map { String(cString: $0) },
                apnsUniqueID: result.apns_unique_id.map { String(cString: $0) },
                requestID: result.apns_request_id.map { String(cString: $0) }, retryAfter: result.retry_after.map { String(cString: $0) }, body: body)
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
        self = .failure(error, retry: result.retry != 0)
    }
}
