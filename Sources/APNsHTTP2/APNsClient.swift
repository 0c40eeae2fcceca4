import APNs
import CCurl
import Metrics
import Foundation
import Logging

/// Sends notifications over a shared group of HTTP/2 connections to APNs.
///
/// One client per (credentials, environment), shared by every job in the process. `send` may be
/// called from any number of tasks; at most `maxInFlight` requests are admitted at once.
/// Connection-level trouble (GOAWAY, refused streams, resets) is retried on a fresh connection;
/// a stale provider token is replaced and the request sent once more. Every other answer,
/// including rejections, is returned for the caller to act on.
public final class APNsClient: Sendable {
    public let configuration: APNsClientConfiguration
    private let pool: APNsConnectionPool
    /// At most `maxInFlight` notifications at once; `send` takes a slot itself, callers that
    /// take one first (to bound the tasks they start) use `sendAdmitted`.
    public let admission: AsyncSemaphore
    private let logger: Logger
    /// Each HTTP/2 exchange, from handing it to the connection to its answer (retries are
    /// exchanges of their own). Made once: a handle per request would cost a registry lookup.
    private let latency: CoreMetrics.Timer

    public init(configuration: APNsClientConfiguration, logger: Logger = Logger(label: "pushworker.apns")) {
        self.configuration = configuration
        self.logger = logger
        self.latency = CoreMetrics.Timer(label: "pushworker_apns_request_duration_seconds", dimensions: [("app", configuration.name)])
        self.pool = APNsConnectionPool(configuration: configuration)
        self.admission = AsyncSemaphore(limit: max(1, configuration.maxInFlight))
    }

    deinit {
        pool.shutdown()
    }

    /// Requests on the connections now; read when metrics are scraped, not kept per request.
    public var requestsInFlight: Int { pool.streamsInUse }

    /// Connections with a socket open to APNs (or to the proxy) now.
    public var openConnections: Int { pool.connections.count { $0.isOpen } }

    /// Finishes the requests in flight, then closes the connections.
    public func shutdown() {
        pool.shutdown()
    }

    /// Sends one notification and returns APNs' answer.
    public func send(_ request: APNsRequest) async throws(APNsClientError) -> APNsResponse {
        await admission.acquire()
        defer { admission.release() }
        return try await sendAdmitted(request)
    }

    /// `send` for a caller that already holds an `admission` slot.
    public func sendAdmitted(_ request: APNsRequest) async throws(APNsClientError) -> APNsResponse {
        do { try request.validate() } catch { throw .invalidRequest(error) }
        var token: ProviderToken?
        var refreshedToken = false
        var transportAttempts = 0
        while true {
            var headers = request.headers.map { "\($0.name): \($0.value)" }
            if case .token(let source) = configuration.authentication {
                if token == nil {
                    do { token = try source.current() } catch { throw .credentials(error.description) }
                }
                headers.append("authorization: bearer \(token!.jwt)")
            }
            let outcome = await perform(url: configuration.baseURL + request.path, headers: headers, body: request.payload)
            switch outcome {
            case .response(let status, let version, let apnsID, let uniqueID, let body):
                guard version == Int(CURL_HTTP_VERSION_2_0) else {
                    throw .transport("\(configuration.baseURL) did not negotiate HTTP/2 (ALPN h2)")
                }
                let response = APNsResponse.parse(status: status, apnsID: apnsID, apnsUniqueID: uniqueID, body: body)
                switch response.reason?.disposition {
                case .retryWithNewProviderToken where !refreshedToken:
                    if case .token(let source) = configuration.authentication, let rejected = token {
                        refreshedToken = true
                        do { token = try source.replace(rejected) } catch { throw .credentials(error.description) }
                        logger.notice("APNs called the provider token expired; retrying with a new one", metadata: ["key_id": "\(source.keyID)"])
                        continue
                    }
                    return response
                case .retryOnNewConnection where transportAttempts < configuration.transportRetries:
                    transportAttempts += 1
                    continue
                default:
                    return response
                }
            case .failure(let code, let message):
                let error = Self.classify(code: code, message: message, url: configuration.baseURL)
                guard error.isRetryable, case .transport = error, transportAttempts < configuration.transportRetries else {
                    throw error
                }
                transportAttempts += 1
                logger.debug("retrying after a transport error", metadata: ["error": "\(message)", "attempt": "\(transportAttempts)"])
            }
        }
    }

    /// Sends on the connection the pool picks and tells the pool how it went.
    private func perform(url: String, headers: [String], body: [UInt8]) async -> CurlOutcome {
        let index = await pool.acquire()
        let start = ContinuousClock.now
        let outcome = await withCheckedContinuation { continuation in
            let transfer = CurlTransfer(url: url, headers: headers, body: body, continuation: continuation)
            if !pool.connections[index].submit(transfer) {
                transfer.finish(.failure(code: UInt32.max, message: "shut down"))
            }
        }
        latency.record(duration: ContinuousClock.now - start)
        // APNs raises a connection's stream limit once it has accepted the credentials; a 403
        // (or no answer at all) leaves the connection at one stream.
        if case .response(let status, _, _, _, _) = outcome, status != 403 {
            pool.release(index, answered: true)
        } else {
            pool.release(index, answered: false)
        }
        return outcome
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
}
