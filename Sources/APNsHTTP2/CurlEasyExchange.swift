import CCurl
import CNGHTTP2
import Foundation

/// One HTTPS request run to completion with libcurl's easy interface, on a thread of its own:
/// for the rare calls beside the push path (APNs' channel management, FCM's token endpoint), where
/// a blocking transfer is simplest and holds none of Swift's cooperative threads.
package enum CurlEasyExchange {
    package enum Method: String, Sendable { case get = "GET", post = "POST", delete = "DELETE" }

    package struct Answer: Sendable {
        package var status: Int
        package var httpVersion: Int
        package var requestID: String?
        package var channelID: String?
        package var body: [UInt8]
        package var isHTTP2: Bool { httpVersion == Int(CURL_HTTP_VERSION_2_0) }
    }

    /// libcurl's code and message when no answer came.
    package struct Failure: Error, Sendable {
        package var code: CURLcode
        package var message: String
    }

    /// Runs the request; `configure` sets what else the caller's connection needs (TLS roots, a
    /// client certificate, a proxy, timeouts) on the easy handle before it runs.
    package static func perform(
        _ method: Method, url: String, headers: [String], body: [UInt8] = [], threadName: String,
        configure: @escaping @Sendable (UnsafeMutableRawPointer) -> Void
    ) async -> Result<Answer, Failure> {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                // Named from inside: Foundation on Linux ignores a name set before the start.
                Thread.current.name = threadName
                let result = performBlocking(method, url: url, headers: headers, body: body, configure: configure)
                // The TLS session's per-thread OpenSSL state goes before the caller goes on: left to
                // the thread's exit, a process that ends right after the call (`pushworker channels`)
                // exits first, and LeakSanitizer reports it.
                pw_openssl_thread_stop()
                continuation.resume(returning: result)
            }
            thread.start()
        }
    }

    private static func performBlocking(
        _ method: Method, url: String, headers: [String], body: [UInt8], configure: (UnsafeMutableRawPointer) -> Void
    ) -> Result<Answer, Failure> {
        guard let easy = curl_easy_init() else { return .failure(Failure(code: CURLE_FAILED_INIT, message: "curl_easy_init failed")) }
        // Owns the URL, header list, body and error buffer libcurl reads, and collects the answer.
        let transfer = CurlTransfer(url: url, headers: headers, body: body, continuation: nil)
        return withExtendedLifetime(transfer) {
            // Inside: libcurl may touch the error buffer and the header list until cleanup, so
            // the transfer that owns them outlives the handle.
            defer { curl_easy_cleanup(easy) }
            let me = Unmanaged.passUnretained(transfer).toOpaque()
            _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_URL, transfer.url)
            _ = pw_curl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
            switch method {
            case .post:
                _ = pw_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
                _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_POSTFIELDS, transfer.body)
                _ = pw_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(transfer.bodyCount))
            case .get:
                _ = pw_curl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
            case .delete:
                _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_CUSTOMREQUEST, "DELETE")
            }
            _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, transfer.headers)
            _ = pw_curl_easy_setopt_callback(easy, CURLOPT_HEADERFUNCTION, curlHeaderCallback)
            _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, me)
            _ = pw_curl_easy_setopt_callback(easy, CURLOPT_WRITEFUNCTION, curlWriteCallback)
            _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me)
            _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer)
            _ = pw_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
            configure(easy)
            let code = curl_easy_perform(easy)
            guard code == CURLE_OK else {
                let detail = transfer.errorMessage
                return .failure(Failure(code: code, message: detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail))
            }
            var status = 0, version = 0
            _ = pw_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            _ = pw_curl_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
            return .success(Answer(status: status, httpVersion: version, requestID: transfer.requestID, channelID: transfer.channelID, body: transfer.responseBody))
        }
    }
}
