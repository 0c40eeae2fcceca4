import APNs
import CCurl
import Foundation
import Synchronization

/// The libcurl transport's connection (``APNsTransport/curl``): a libcurl multi handle limited to a single connection, driven
/// by its own thread, multiplexing many streams.
///
/// A multi handle per connection, rather than one for the whole group, is what lets the pool
/// see each connection: which one is new (and so limited to one stream until APNs has accepted
/// a request), how many streams each carries, and which one failed.
///
/// Tasks hand transfers over through `submit`, which wakes the thread with `curl_multi_wakeup`
/// when it may be waiting;
/// every libcurl call happens on the thread, as the multi interface requires.
final class CurlConnection: APNsConnection, @unchecked Sendable {
    private let configuration: APNsClientConfiguration
    private let multi: UnsafeMutableRawPointer
    private let submitted = Mutex<(transfers: [CurlTransfer], closed: Bool)>(([], false))
    /// Sockets libcurl holds open for this connection (0 or 1; briefly 2 while it tries two
    /// addresses), written by C callbacks; freed in deinit, after the thread and libcurl are done.
    private let sockets: UnsafeMutablePointer<Int>

    // I/O thread only.
    private var idleHandles: [UnsafeMutableRawPointer] = []
    private var running = 0

    init(configuration: APNsClientConfiguration) {
        CurlGlobal.initialize()
        self.configuration = configuration
        sockets = .allocate(capacity: 1)
        sockets.initialize(to: 0)
        multi = curl_multi_init()
        _ = pw_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX)
        _ = pw_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 1)
        _ = pw_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 1)
        _ = pw_curl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.maxConcurrentStreams)
        // Named from inside: Foundation on Linux ignores a name set before the start.
        let thread = Thread { [self] in
            Thread.current.name = "apns-curl"
            self.run()
        }
        thread.start()
    }

    deinit {
        sockets.deallocate()
    }

    /// Whether libcurl holds a socket open to the server (or the proxy) now.
    var isOpen: Bool { pw_counter_load(sockets) > 0 }

    /// libcurl 7.88's multi interface sends no PINGs.
    var keepalivePings: (sent: UInt64, answered: UInt64) { (0, 0) }

    /// A task per request: libcurl takes a URL and a header list per transfer, so a batch saves
    /// nothing here.
    func start(_ batch: APNsExchangeBatch, round: APNsExchangeRound) {
        let headers = batch.headers
        for (index, (path, tag)) in zip(batch.pathStrings, batch.tags).enumerated() {
            let body = batch.body(at: index)
            Task { round.complete(Int(tag), await exchange(path: path, headers: headers, body: body)) }
        }
    }

    func exchange(path: String, headers: [(name: String, value: String)], body: [UInt8]) async -> APNsExchangeOutcome {
        let url = configuration.baseURL + path
        let outcome = await withCheckedContinuation { continuation in
            let transfer = CurlTransfer(url: url, headers: headers.map { "\($0.name): \($0.value)" }, body: body, continuation: continuation)
            if !submit(transfer) {
                transfer.finish(.failure(code: UInt32.max, message: "shut down"))
            }
        }
        switch outcome {
        case .response(let status, let version, let apnsID, let uniqueID, let requestID, let retryAfter, let body):
            guard version == Int(CURL_HTTP_VERSION_2_0) else {
                return .failure(.transport("\(configuration.baseURL) did not negotiate HTTP/2 (ALPN h2)"), retry: false)
            }
            return .response(status: status, apnsID: apnsID, apnsUniqueID: uniqueID, requestID: requestID, retryAfter: retryAfter, body: body)
        case .failure(let code, let message):
            let error = Self.classify(code: code, message: message, url: configuration.baseURL)
            if case .transport = error { return .failure(error, retry: true) }
            return .failure(error, retry: false)
        }
    }

    private static func classify(code: UInt32, message: String, url: String) -> APNsClientError {
        switch code {
        case UInt32.max:
            return .shutdown
        case CURLE_OPERATION_TIMEDOUT.rawValue:
            return .timeout("no answer from \(url): \(message)")
        case CURLE_SSL_CERTPROBLEM.rawValue, CURLE_SSL_CIPHER.rawValue, CURLE_BAD_FUNCTION_ARGUMENT.rawValue:
            return .credentials("\(message)")
        case CURLE_PEER_FAILED_VERIFICATION.rawValue, CURLE_SSL_CACERT_BADFILE.rawValue:
            return .transport("TLS verification of \(url) failed: \(message)")
        default:
            return .transport("\(url): \(message)")
        }
    }

    /// Queues a transfer; false when the driver is shutting down. Only the first transfer
    /// queued since the thread last looked wakes it: the wake-up is a write to a socket, and
    /// one per notification showed up in the profile.
    private func submit(_ transfer: CurlTransfer) -> Bool {
        let (accepted, first) = submitted.withLock { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            state.transfers.append(transfer)
            return (true, state.transfers.count == 1)
        }
        if first { curl_multi_wakeup(multi) }
        return accepted
    }

    func shutdown() {
        submitted.withLock { $0.closed = true }
        curl_multi_wakeup(multi)
    }

    private func run() {
        while true {
            let (transfers, closed) = submitted.withLock { state in
                defer { state.transfers.removeAll(keepingCapacity: true) }
                return (state.transfers, state.closed)
            }
            for transfer in transfers { start(transfer) }
            if closed && running == 0 { break }
            var stillRunning: Int32 = 0
            curl_multi_perform(multi, &stillRunning)
            collectFinished()
            if transfers.isEmpty {
                _ = curl_multi_poll(multi, nil, 0, 1000, nil)
            }
        }
        for handle in idleHandles { curl_easy_cleanup(handle) }
        curl_multi_cleanup(multi)
    }

    private func start(_ transfer: CurlTransfer) {
        let easy = idleHandles.popLast() ?? curl_easy_init()!
        configure(easy, for: transfer)
        // The multi handle now refers to the transfer through PRIVATE and the callbacks' data
        // pointers: keep it alive until `collectFinished` removes the handle.
        let retained = Unmanaged.passRetained(transfer).toOpaque()
        _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, retained)
        _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, retained)
        _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, retained)
        let added = curl_multi_add_handle(multi, easy)
        guard added == CURLM_OK else {
            Unmanaged<CurlTransfer>.fromOpaque(retained).release()
            transfer.finish(.failure(code: 0, message: "curl_multi_add_handle failed: \(String(cString: curl_multi_strerror(added)))"))
            recycle(easy)
            return
        }
        running += 1
    }

    private func configure(_ easy: UnsafeMutableRawPointer, for transfer: CurlTransfer) {
        _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_URL, transfer.url)
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
        _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_POSTFIELDS, transfer.body)
        _ = pw_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(transfer.bodyCount))
        _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, transfer.headers)
        _ = pw_curl_easy_setopt_callback(easy, CURLOPT_HEADERFUNCTION, curlHeaderCallback)
        _ = pw_curl_easy_setopt_callback(easy, CURLOPT_WRITEFUNCTION, curlWriteCallback)
        _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer)
        // Queue on the one connection rather than fail for want of another.
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        // APNs answers are a few dozen bytes; libcurl's default 16 KiB receive buffer per handle
        // would be most of the client's memory at a thousand streams.
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, 1024)
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 16_384)
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        pw_curl_count_sockets(easy, sockets)
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        configuration.applyCurlOptions(to: easy)
    }

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            var privatePointer: UnsafeMutableRawPointer?
            _ = pw_curl_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &privatePointer)
            curl_multi_remove_handle(multi, easy)
            running -= 1
            guard let privatePointer else { continue }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(privatePointer).takeRetainedValue()
            if code == CURLE_OK {
                var status = 0, version = 0
                _ = pw_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
                _ = pw_curl_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
                transfer.finish(.response(
                    status: status, httpVersion: version, apnsID: transfer.apnsID, apnsUniqueID: transfer.apnsUniqueID,
                    requestID: transfer.requestID, retryAfter: transfer.retryAfter, body: transfer.responseBody))
            } else {
                let detail = transfer.errorMessage
                let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
                transfer.finish(.failure(code: code.rawValue, message: message))
            }
            recycle(easy)
        }
    }

    /// Handles kept for reuse, beyond which finished ones are freed: each keeps ~20 KiB of
    /// buffers, so a burst's worth would stay allocated long after it.
    static let idleHandleLimit = 32

    private func recycle(_ easy: UnsafeMutableRawPointer) {
        if idleHandles.count < Self.idleHandleLimit {
            curl_easy_reset(easy)
            idleHandles.append(easy)
        } else {
            curl_easy_cleanup(easy)
        }
    }
}

/// Each stores into the ``CurlTransfer`` its userdata points to (also the channel manager's).
let curlHeaderCallback: pw_curl_data_callback = { buffer, size, count, userdata in
    let length = size * count
    guard let buffer, let userdata else { return length }
    Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue().receiveHeader(UnsafeRawBufferPointer(start: buffer, count: length))
    return length
}

let curlWriteCallback: pw_curl_data_callback = { buffer, size, count, userdata in
    let length = size * count
    guard let buffer, let userdata else { return length }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    // Error bodies are a few dozen bytes; anything past 64 KiB is not APNs talking.
    if transfer.responseBody.count < 65_536 {
        transfer.responseBody.append(contentsOf: UnsafeRawBufferPointer(start: buffer, count: length))
    }
    return length
}

/// `curl_global_init` must run once, before any other libcurl call and not concurrently with one.
enum CurlGlobal {
    private static let initialized: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        return true
    }()

    static func initialize() { _ = initialized }
}


extension APNsClientConfiguration {
    /// Timeouts, TLS verification, the CA file, the proxy and a client certificate: what every
    /// libcurl handle to APNs takes from the configuration, pushes and channel management alike.
    func applyCurlOptions(to easy: UnsafeMutableRawPointer) {
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(requestTimeout / .milliseconds(1)))
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(connectTimeout / .milliseconds(1)))
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 1)
        _ = pw_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 2)
        // libcurl copies string options: the temporary C strings may go once set.
        if let caFile { _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_CAINFO, caFile) }
        if let proxy { _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_PROXY, proxy) }
        if case .certificate(let identity) = authentication {
            _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_SSLCERT, identity.certificateFile)
            _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_SSLCERTTYPE, identity.format.rawValue)
            if let keyFile = identity.keyFile { _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_SSLKEY, keyFile) }
            if let password = identity.password { _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_KEYPASSWD, password) }
        }
    }
}
