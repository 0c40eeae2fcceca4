import APNs
import CCurl
import CNGHTTP2
import Foundation
import Logging
import Synchronization

/// Creates, reads, lists and deletes an app's Live Activity broadcast channels through APNs'
/// channel management API (`/1/apps/<bundle id>/channels`, on its own hosts: see
/// ``APNsClientConfiguration/managementURL``), with the client configuration's credentials,
/// CA file and proxy.
///
/// Always over libcurl's easy interface, whatever the configuration's `transport`: channel
/// management is a handful of operator commands, not a fan-out, so neither the nghttp2 engine's
/// speed nor a pooled connection is worth teaching that engine GET, DELETE and response headers.
/// Each call runs its one blocking transfer (HTTP/2 over TLS, bounded by the request and
/// connect timeouts) on a thread of its own, so no cooperative thread waits on the network, and
/// frees its handle, header list and buffers when it ends, whatever the outcome: the manager
/// holds no connection and no C resource between calls.
public final class APNsChannelManager: ChannelManaging {
    public let configuration: APNsClientConfiguration
    private let logger: Logger
    private let closed = Mutex(false)

    public init(configuration: APNsClientConfiguration, logger: Logger = Logger(label: "pushworker.apns.channels")) {
        CurlGlobal.initialize()
        self.configuration = configuration
        self.logger = logger
    }

    /// Refuses further calls (those under way finish). There is nothing else to close.
    public func shutdown() {
        closed.withLock { $0 = true }
    }

    /// `POST /1/apps/<bundle id>/channels`: a new channel, its id as APNs assigned it.
    public func create(
        bundleID: String, storagePolicy: APNsChannelStoragePolicy, requestID: UUID?
    ) async throws(APNsChannelError) -> APNsChannel {
        let app = try Self.app(bundleID)
        let body = #"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"LiveActivity"}"#
        let headers = requestID.map { ["apns-request-id: \($0.uuidString.lowercased())"] } ?? []
        let answer = try await exchange(.post, "/1/apps/\(app)/channels", headers: headers, body: Array(body.utf8))
        guard answer.status == 201 else { throw answer.rejection }
        guard let id = answer.channelID, !id.isEmpty else {
            throw .transport("\(configuration.managementURL) answered 201 without an apns-channel-id")
        }
        return APNsChannel(id: id, storagePolicy: storagePolicy, requestID: answer.requestID)
    }

    /// `GET /1/apps/<bundle id>/channels` with `apns-channel-id`: the channel and its storage policy.
    public func channel(bundleID: String, id: String) async throws(APNsChannelError) -> APNsChannel {
        let app = try Self.app(bundleID)
        do { try APNsChannel.validate(id: id) } catch { throw .invalidRequest(error) }
        let answer = try await exchange(.get, "/1/apps/\(app)/channels", headers: ["apns-channel-id: \(id)"])
        guard answer.status == 200 else { throw answer.rejection }
        let object = try answer.jsonObject(from: configuration.managementURL)
        guard let number = (object["message-storage-policy"] as? NSNumber)?.intValue,
            let policy = APNsChannelStoragePolicy(rawValue: number)
        else {
            throw .transport("\(configuration.managementURL) answered without a known message-storage-policy")
        }
        return APNsChannel(id: id, storagePolicy: policy, requestID: answer.requestID)
    }

    /// `GET /1/apps/<bundle id>/all-channels`: every channel id of the app in this environment.
    public func channels(bundleID: String) async throws(APNsChannelError) -> [String] {
        let app = try Self.app(bundleID)
        let answer = try await exchange(.get, "/1/apps/\(app)/all-channels")
        guard answer.status == 200 else { throw answer.rejection }
        let object = try answer.jsonObject(from: configuration.managementURL)
        guard let ids = object["channels"] as? [String] else {
            throw .transport("\(configuration.managementURL) answered without a channels list")
        }
        return ids
    }

    /// `DELETE /1/apps/<bundle id>/channels` with `apns-channel-id`.
    public func delete(bundleID: String, id: String) async throws(APNsChannelError) {
        let app = try Self.app(bundleID)
        do { try APNsChannel.validate(id: id) } catch { throw .invalidRequest(error) }
        let answer = try await exchange(.delete, "/1/apps/\(app)/channels", headers: ["apns-channel-id: \(id)"])
        guard answer.status == 204 || answer.status == 200 else { throw answer.rejection }
    }

    // MARK: - One exchange

    enum Method: String, Sendable { case get = "GET", post = "POST", delete = "DELETE" }

    /// What came back for one request.
    struct Answer: Sendable {
        var status: Int
        var requestID: String?
        var channelID: String?
        var body: [UInt8]

        var reason: APNsErrorReason? {
            APNsResponse.parse(status: status, apnsID: nil, apnsUniqueID: nil, body: body).reason
        }

        var rejection: APNsChannelError { .rejected(status: status, reason: reason, requestID: requestID) }

        func jsonObject(from url: String) throws(APNsChannelError) -> [String: Any] {
            guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
                throw .transport("\(url) answered \(status) with a body that is not a JSON object")
            }
            return object
        }
    }

    /// The bundle id as the path names it: a device topic's `.push-type.liveactivity` dropped,
    /// and nothing that could leave the path segment.
    private static func app(_ bundleID: String) throws(APNsChannelError) -> String {
        let app = APNsRequest(deviceToken: "", topic: bundleID, payload: []).bundleID
        let allowed = app.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: "_")
        }
        guard !app.isEmpty, allowed else {
            throw .invalidRequest(APNsValidationError(field: "topic", "'\(bundleID)' is not a bundle id"))
        }
        return app
    }

    /// Sends with the provider token (replaced once, and the request sent again, when APNs calls
    /// it expired, as the client does) or the client certificate.
    private func exchange(_ method: Method, _ path: String, headers: [String] = [], body: [UInt8] = []) async throws(APNsChannelError) -> Answer {
        guard !closed.withLock({ $0 }) else { throw .transport("the channel manager has been shut down") }
        var source: ProviderTokenSource?
        var token: ProviderToken?
        if case .token(let tokens) = configuration.authentication {
            source = tokens
            do { token = try tokens.current() } catch { throw .credentials(error.description) }
        }
        var refreshed = false
        while true {
            var sent = headers
            if let token { sent.append("authorization: \(token.authorization)") }
            let request = Transfer(method: method, url: configuration.managementURL + path, headers: sent, body: body)
            let answer = try await perform(request).get()
            logger.debug("channel management", metadata: [
                "method": "\(method.rawValue)", "path": "\(path)", "status": "\(answer.status)", "request_id": "\(answer.requestID ?? "-")",
            ])
            guard answer.reason == .expiredProviderToken, !refreshed, let source, let rejected = token else { return answer }
            refreshed = true
            do { token = try source.replace(rejected) } catch { throw .credentials(error.description) }
            logger.notice("APNs called the provider token expired; retrying with a new one", metadata: ["key_id": "\(source.keyID)"])
        }
    }

    struct Transfer: Sendable {
        var method: Method
        var url: String
        var headers: [String]
        var body: [UInt8]
    }

    /// Runs the transfer on a thread of its own, with the client's TLS, proxy and timeouts.
    private func perform(_ transfer: Transfer) async -> Result<Answer, APNsChannelError> {
        let configuration = configuration
        let url = configuration.managementURL
        let outcome = await CurlEasyExchange.perform(
            CurlEasyExchange.Method(rawValue: transfer.method.rawValue) ?? .get, url: transfer.url, headers: transfer.headers, body: transfer.body,
            threadName: "apns-channels", configure: { configuration.applyCurlOptions(to: $0) })
        switch outcome {
        case .failure(let failure):
            let message = failure.message
            switch failure.code {
            case CURLE_OPERATION_TIMEDOUT: return .failure(.transport("no answer from \(url): \(message)"))
            case CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER: return .failure(.credentials(message))
            case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE:
                return .failure(.transport("TLS verification of \(url) failed: \(message)"))
            default: return .failure(.transport("\(url): \(message)"))
            }
        case .success(let answer):
            guard answer.isHTTP2 else { return .failure(.transport("\(url) did not negotiate HTTP/2 (ALPN h2)")) }
            return .success(Answer(status: answer.status, requestID: answer.requestID, channelID: answer.channelID, body: answer.body))
        }
    }
}
