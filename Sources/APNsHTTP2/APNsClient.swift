import APNs
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

    /// PINGs sent on quiet connections and the answers received since the start (nghttp2
    /// transport; the curl transport sends none).
    public var keepalivePings: (sent: UInt64, answered: UInt64) {
        pool.connections.reduce((sent: 0, answered: 0)) { total, connection in
            let pings = connection.keepalivePings
            return (total.sent + pings.sent, total.answered + pings.answered)
        }
    }

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
            var headers = request.headers
            if case .token(let source) = configuration.authentication {
                if token == nil {
                    do { token = try source.current() } catch { throw .credentials(error.description) }
                }
                headers.append(("authorization", token!.authorization))
            }
            switch await perform(path: request.path, headers: headers, body: request.payload) {
            case .response(let status, let apnsID, let uniqueID, let body):
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
            case .failure(let error, let retry):
                guard retry, transportAttempts < configuration.transportRetries else { throw error }
                transportAttempts += 1
                logger.debug("retrying after a transport error", metadata: ["error": "\(error)", "attempt": "\(transportAttempts)"])
            }
        }
    }

    /// Sends on the connection the pool picks and tells the pool how it went.
    private func perform(path: String, headers: [(name: String, value: String)], body: [UInt8]) async -> APNsExchangeOutcome {
        let index = await pool.acquire()
        let start = ContinuousClock.now
        let outcome = await pool.connections[index].exchange(path: path, headers: headers, body: body)
        latency.record(duration: ContinuousClock.now - start)
        // APNs raises a connection's stream limit once it has accepted the credentials; a 403
        // (or no answer at all) leaves the connection at one stream.
        if case .response(let status, _, _, _) = outcome, status != 403 {
            pool.release(index, answered: true)
        } else {
            pool.release(index, answered: false)
        }
        return outcome
    }
}
