/// Requests that differ only in their path, handed to one connection at once: a job's fan-out
/// is one payload and one set of headers for many device tokens, so they are encoded once and
/// the paths are the only per-notification bytes. A broadcast's path is its own
/// (`/4/broadcasts/apps/<bundle id>`), appended whole.
package struct APNsExchangeBatch: Sendable {
    /// The paths (`/3/device/<token>`, or a broadcast's), each NUL-terminated, back to back: the nghttp2 engine's
    /// format, written without a Swift string per path.
    private(set) var paths: [UInt8] = []
    /// The round's slot of each path, in order.
    private(set) var tags: [UInt32] = []
    /// name NUL value NUL … (lowercase names), the same for every path.
    let headerBlock: [UInt8]
    /// The one body of every request; or, with `bodyEnds`, every request's body back to back.
    private(set) var body: [UInt8]
    /// Where each request's own body ends in `body` (FCM's requests, each naming its device);
    /// nil when the requests share `body` (APNs').
    private(set) var bodyEnds: [Int]?

    init(headers: [(name: String, value: String)], body: [UInt8], capacity: Int) {
        var block: [UInt8] = []
        block.reserveCapacity(headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 })
        for header in headers {
            block.append(contentsOf: header.name.utf8)
            block.append(0)
            block.append(contentsOf: header.value.utf8)
            block.append(0)
        }
        headerBlock = block
        self.body = body
        bodyEnds = nil
        paths.reserveCapacity(capacity * 76)
        tags.reserveCapacity(capacity)
    }

    /// A batch whose requests each bring a body of their own (`append(path:tag:writingBody:)`), about
    /// `bodyBytes` of them in all.
    package init(headers: [(name: String, value: String)], ownBodies capacity: Int, bodyBytes: Int) {
        self.init(headers: headers, body: [], capacity: capacity)
        body.reserveCapacity(bodyBytes)
        bodyEnds = []
        bodyEnds?.reserveCapacity(capacity)
    }

    /// The fan-out's fast path: the device prefix and the token's bytes, no path string.
    mutating func append(deviceToken: String, tag: Int) {
        precondition(bodyEnds == nil, "a batch of requests with bodies of their own takes a body with each")
        paths.append(contentsOf: "/3/device/".utf8)
        paths.append(contentsOf: deviceToken.utf8)
        paths.append(0)
        tags.append(UInt32(tag))
    }

    /// A request with a body of its own, written into the batch by `write` (no array of its own).
    package mutating func append(path: String, tag: Int, writingBody write: (inout [UInt8]) -> Void) {
        precondition(bodyEnds != nil, "a batch that shares one body takes none with a request")
        appendPath(path, tag: tag)
        write(&body)
        bodyEnds?.append(body.count)
    }

    /// Request `index`'s body.
    func body(at index: Int) -> [UInt8] {
        guard let ends = bodyEnds else { return body }
        return Array(body[(index == 0 ? 0 : ends[index - 1])..<ends[index]])
    }

    /// Any other request (a broadcast): its whole path.
    mutating func append(path: String, tag: Int) {
        precondition(bodyEnds == nil, "a batch of requests with bodies of their own takes a body with each")
        appendPath(path, tag: tag)
    }

    private mutating func appendPath(_ path: String, tag: Int) {
        paths.append(contentsOf: path.utf8)
        paths.append(0)
        tags.append(UInt32(tag))
    }

    /// The paths as strings, for a transport that takes a URL per request (libcurl).
    var pathStrings: [String] {
        paths.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
    }

    /// The headers as pairs, for a transport that takes them so (libcurl).
    var headers: [(name: String, value: String)] {
        let fields = headerBlock.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        return stride(from: 0, to: fields.count - 1, by: 2).map { (fields[$0], fields[$0 + 1]) }
    }
}
