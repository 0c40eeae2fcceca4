import CNGHTTP2
import Foundation

/// The nghttp2 transport's connection (``APNsTransport/nghttp2``): a C engine (CNGHTTP2) that
/// owns the socket, the TLS session and the nghttp2 session on a thread of its own, and calls
/// back once per request. Nothing of Swift crosses into C but one retained ``NGHTTP2Exchange``
/// per request, taken back by the completion.
final class NGHTTP2Connection: APNsConnection, @unchecked Sendable {
    /// nil when the engine could not start or the configuration cannot be served; every exchange
    /// then fails with `unusable`.
    private let handle: OpaquePointer?
    private let unusable: APNsClientError?
    private let baseURL: String

    init(configuration: APNsClientConfiguration) {
        baseURL = configuration.baseURL
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

    func exchange(path: String, headers: [(name: String, value: String)], body: [UInt8]) async -> APNsExchangeOutcome {
        guard let handle else { return .failure(unusable ?? .shutdown, retry: false) }
        // name NUL value NUL …, the engine's format: one buffer, copied once more into the
        // request's single allocation on the C side.
        var block: [UInt8] = []
        block.reserveCapacity(headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 })
        for header in headers {
            block.append(contentsOf: header.name.utf8)
            block.append(0)
            block.append(contentsOf: header.value.utf8)
            block.append(0)
        }
        var path = path
        return await withUnsafeContinuation { continuation in
            let exchange = Unmanaged.passRetained(NGHTTP2Exchange(baseURL: baseURL, continuation: continuation)).toOpaque()
            let queued = path.withUTF8 { path in
                block.withUnsafeBufferPointer { headers in
                    body.withUnsafeBufferPointer { body in
                        path.withMemoryRebound(to: CChar.self) { path in
                            pw_h2_submit(handle, path.baseAddress, path.count, headers.baseAddress, headers.count, body.baseAddress, body.count, exchange)
                        }
                    }
                }
            }
            if queued != 0 {
                Unmanaged<NGHTTP2Exchange>.fromOpaque(exchange).takeRetainedValue().finish(.failure(.shutdown, retry: false))
            }
        }
    }

    func shutdown() {
        if let handle { pw_h2_shutdown(handle) }
    }
}

/// Called by the engine on its thread, once per request: takes back the exchange retained at submit.
let nghttp2Completion: pw_h2_completion = { context, result in
    guard let context, let result else { return }
    Unmanaged<NGHTTP2Exchange>.fromOpaque(context).takeRetainedValue().complete(result.pointee)
}
