import CCurl
import Foundation

/// What came back for one transfer.
enum CurlOutcome: Sendable {
    case response(status: Int, httpVersion: Int, apnsID: String?, apnsUniqueID: String?, requestID: String?, retryAfter: String?, body: [UInt8])
    case failure(code: UInt32, message: String)
}

/// One request's C-side state: the URL, header list, body and error buffer libcurl reads from
/// while the transfer runs, and what it writes back. Everything is owned here and freed in
/// deinit; the I/O thread holds a strong reference from `curl_multi_add_handle` until the
/// transfer is removed, so libcurl's callbacks never see a freed object.
final class CurlTransfer: @unchecked Sendable {
    let url: UnsafeMutablePointer<CChar>
    private(set) var headers: UnsafeMutablePointer<curl_slist>?
    let body: UnsafeMutableRawPointer
    let bodyCount: Int
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// nil for a transfer run to completion by `curl_easy_perform` (the channel manager), whose
    /// caller reads the fields itself.
    private let continuation: CheckedContinuation<CurlOutcome, Never>?

    // Written by libcurl's callbacks on the I/O thread.
    var apnsID: String?
    var apnsUniqueID: String?
    var requestID: String?
    /// `apns-channel-id`: the channel management API's answer to a create.
    var channelID: String?
    /// `retry-after`: FCM's 429 and 503.
    var retryAfter: String?
    var responseBody: [UInt8] = []

    init(url: String, headers: [String], body: [UInt8], continuation: CheckedContinuation<CurlOutcome, Never>?) {
        self.url = strdup(url)
        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = curl_slist_append(list, header) }
        self.headers = list
        let copy = malloc(max(body.count, 1))!
        body.withUnsafeBytes { if let base = $0.baseAddress { copy.copyMemory(from: base, byteCount: $0.count) } }
        self.body = copy
        self.bodyCount = body.count
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        self.errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        self.continuation = continuation
    }

    deinit {
        free(url)
        curl_slist_free_all(headers)
        free(body)
        errorBuffer.deallocate()
    }

    func finish(_ outcome: CurlOutcome) {
        continuation?.resume(returning: outcome)
    }

    /// Called for each response header line, such as `apns-id: …\r\n`. Runs for every header of
    /// every response, so it works on bytes (Foundation's trimming bridges to NSString).
    func receiveHeader(_ line: UnsafeRawBufferPointer) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = line[..<colon]
        func value() -> String {
            func isSpace(_ byte: UInt8) -> Bool { byte == 32 || byte == 9 || byte == 13 || byte == 10 }
            var start = colon + 1
            var end = line.count
            while start < end && isSpace(line[start]) { start += 1 }
            while end > start && isSpace(line[end - 1]) { end -= 1 }
            return String(decoding: line[start..<end], as: UTF8.self)
        }
        if Self.equalsIgnoringCase(name, "apns-id") {
            apnsID = value()
        } else if Self.equalsIgnoringCase(name, "apns-unique-id") {
            apnsUniqueID = value()
        } else if Self.equalsIgnoringCase(name, "apns-request-id") {
            requestID = value()
        } else if Self.equalsIgnoringCase(name, "apns-channel-id") {
            channelID = value()
        } else if Self.equalsIgnoringCase(name, "retry-after") {
            retryAfter = value()
        }
    }

    private static func equalsIgnoringCase(_ bytes: Slice<UnsafeRawBufferPointer>, _ lowercase: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        guard bytes.count == expected.count else { return false }
        var index = 0
        for byte in bytes {
            let lowered: UInt8 = (byte >= 65 && byte <= 90) ? byte &+ 32 : byte
            if lowered != expected[index] { return false }
            index += 1
        }
        return true
    }

    var errorMessage: String {
        String(cString: errorBuffer)
    }
}
