import APNs
import Metrics
import Foundation
import Logging

/// Sends notifications over a shared group of HTTP/2 connections to APNs.
///
/// One client per (credentials, environment), shared by every job in the process. `send` may be
/// called from any number of tasks; the connections' stream limits bound what is on the wire, and
/// the caller bounds what it hands over (the worker's `DeviceAdmission`).
/// Connection-level trouble (GOAWAY, refused streams, resets) is retried on a fresh connection;
/// a stale provider token is replaced and the request sent once more. Every other answer,
/// including rejections, is returned for the caller to act on.
public final class APNsClient: OwnedNotificationSender {
    public let configuration: APNsClientConfiguration
    private let pool: APNsConnectionPool
    private let logger: Logger
    /// Each HTTP/2 exchange, from handing it to the connection to its answer (retries are
    /// exchanges of their own). Made once: a handle per request would cost a registry lookup.
    private let latency: CoreMetrics.Timer
    /// Requests sent again: after a lost connection or a refused stream (`connection`: APNs may
    /// have delivered the first one), or with a new provider token (`provider_token`).
    private let resendsAfterConnectionLoss: CoreMetrics.Counter
    private let resendsWithNewToken: CoreMetrics.Counter

    public init(configuration: APNsClientConfiguration, logger: Logger = Logger(label: "pushworker.apns")) {
        self.configuration = configuration
        self.logger = logger
        self.latency = CoreMetrics.Timer(label: "pushworker_apns_request_duration_seconds", dimensions: [("app", configuration.name)])
        self.resendsAfterConnectionLoss = CoreMetrics.Counter(
            label: "pushworker_apns_resends_total", dimensions: [("app", configuration.name), ("cause", "connection")])
        self.resendsWithNewToken = CoreMetrics.Counter(
            label: "pushworker_apns_resends_total", dimensions: [("app", configuration.name), ("cause", "provider_token")])
        self.pool = APNsConnectionPool(configuration: configuration)
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

    /// A job's fan-out, and every other send (a single one is a batch of one). Requests that
    /// differ only in their device token (one notification for many devices) share one encoding
    /// of their headers and payload, and go to a connection in one hand-over. Final answers reach `answers` on the calling task in waves (each time at least
    /// half of the requests still out have answered), so a notification costs no task switch of
    /// its own, and one slow answer holds back no more than itself once the others are in.
    /// Each request gets exactly one final answer.
    /// Retries are per request: a stale provider token is replaced once and the
    /// requests APNs refused for it are sent again; connection-level failures are sent again on
    /// a fresh connection within `transportRetries`, as soon as they are known.
    public func send(_ requests: [APNsRequest], answers: ([APNsAnswer]) -> Void) async {
        var finals: [APNsAnswer] = []
        var toSend: [Int] = []
        toSend.reserveCapacity(requests.count)
        for index in requests.indices {
            do {
                try requests[index].validate()
                toSend.append(index)
            } catch {
                finals.append((index, .failure(.invalidRequest(error))))
            }
        }
        let round = APNsExchangeRound(count: requests.count, pool: pool, latency: latency, baseURL: configuration.baseURL)
        var token: ProviderToken?
        /// Only the requests that were sent again have an entry.
        var retries: [Int: (transport: Int, refreshedToken: Bool)] = [:]
        var outstanding = 0
        while true {
            if !toSend.isEmpty, case .token(let source) = configuration.authentication, token == nil {
                do { token = try source.current() } catch {
                    for index in toSend { finals.append((index, .failure(.credentials(error.description)))) }
                    toSend = []
                }
            }
            if !toSend.isEmpty {
                await start(toSend, of: requests, token: token, round: round)
                outstanding += toSend.count
                toSend = []
            }
            if !finals.isEmpty {
                answers(finals)
                finals.removeAll(keepingCapacity: true)
            }
            guard outstanding > 0 else { break }
            let wave = await round.nextWave()
            outstanding -= wave.count
            /// The requests APNs refused for the provider token (also in `toSend`).
            var refusedForToken: [Int] = []
            for (index, outcome) in wave {
                switch outcome {
                case .response(let status, let apnsID, let uniqueID, let requestID, _, let body):
                    var response = APNsResponse.parse(status: status, apnsID: apnsID, apnsUniqueID: uniqueID, requestID: requestID, body: body)
                    switch response.disposition {
                    case .retryWithNewProviderToken where token != nil && retries[index]?.refreshedToken != true:
                        retries[index, default: (0, false)].refreshedToken = true
                        refusedForToken.append(index)
                        toSend.append(index)
                        resendsWithNewToken.increment()
                    case .retryOnNewConnection where (retries[index]?.transport ?? 0) < configuration.transportRetries:
                        retries[index, default: (0, false)].transport += 1
                        toSend.append(index)
                        resendsAfterConnectionLoss.increment()
                    default:
                        if let retried = retries[index] { response.sends = 1 + retried.transport }
                        finals.append((index, .success(response)))
                    }
                case .failure(let error, let retry):
                    let attempts = retries[index]?.transport ?? 0
                    if retry, attempts < configuration.transportRetries {
                        retries[index, default: (0, false)].transport = attempts + 1
                        toSend.append(index)
                        resendsAfterConnectionLoss.increment()
                        logger.debug("retrying after a transport error", metadata: ["error": "\(error)", "attempt": "\(attempts + 1)"])
                    } else {
                        finals.append((index, .failure(error)))
                    }
                }
            }
            if !refusedForToken.isEmpty, case .token(let source) = configuration.authentication, let rejected = token {
                do {
                    token = try source.replace(rejected)
                    logger.notice("APNs called the provider token expired; retrying with a new one", metadata: ["key_id": "\(source.keyID)"])
                } catch {
                    // The others in `toSend` (transport retries) go on with the token they had.
                    for index in refusedForToken { finals.append((index, .failure(.credentials(error.description)))) }
                    let refused = Set(refusedForToken)
                    toSend.removeAll { refused.contains($0) }
                }
            }
        }
    }

    /// Hands the requests at `indices` to the connections the pool picks, as many at a time as
    /// they have room for; their answers go to `round` under their index.
    private func start(_ indices: [Int], of requests: [APNsRequest], token: ProviderToken?, round: APNsExchangeRound) async {
        var start = 0
        while start < indices.count {
            let (connection, count) = await pool.acquire(upTo: indices.count - start)
            let slots = indices[start..<(start + count)]
            start += count
            round.assign(slots, to: connection)
            guard let first = slots.first else { continue }
            // Runs of requests that share headers and payload go over as one batch each.
            var template = requests[first]
            var batch = exchangeBatch(for: template, token: token, capacity: count)
            for index in slots {
                let request = requests[index]
                if !request.sharesHeaders(with: template) {
                    pool.connections[connection].start(batch, round: round)
                    template = request
                    batch = exchangeBatch(for: template, token: token, capacity: count)
                }
                if request.isBroadcast {
                    batch.append(path: request.path, tag: index)
                } else {
                    batch.append(deviceToken: request.deviceToken, tag: index)
                }
            }
            pool.connections[connection].start(batch, round: round)
        }
    }

    /// A batch with `request`'s headers (and the provider token's) and payload, no device yet.
    private func exchangeBatch(for request: APNsRequest, token: ProviderToken?, capacity: Int) -> APNsExchangeBatch {
        var headers = request.headers
        if let token { headers.append(("authorization", token.authorization)) }
        return APNsExchangeBatch(headers: headers, body: request.payload, capacity: capacity)
    }
}

extension APNsRequest {
    /// Whether the two go out with the same headers and payload, their device tokens aside (a
    /// broadcast's path follows from its topic, so two broadcasts that share headers share it).
    func sharesHeaders(with other: APNsRequest) -> Bool {
        topic == other.topic && pushType == other.pushType && priority == other.priority && expiration == other.expiration
            && collapseID == other.collapseID && apnsID == other.apnsID && channelID == other.channelID
            && requestID == other.requestID && payload == other.payload
    }
}
