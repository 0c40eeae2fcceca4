import APNs
import APNsHTTP2
import FCM
import Foundation
import Logging
import Metrics

/// Sends FCM HTTP v1 messages (`POST /v1/projects/<project>/messages:send`, one per device)
/// over the same HTTP/2 engine and connection pool as APNs: FCM serves about 100 streams a
/// connection, so a client opens several. A job's message is encoded once; each device's body is
/// its token spliced in, and the devices that go to one connection go over in one hand-over.
/// The access token comes from `FCMAccessTokenSource`, one grant per token's life; a 401 with
/// a token drops it, and the requests refused for it are sent once more with a new one.
/// GOAWAY, refused streams and dropped connections are retried on a fresh connection, as for APNs.
public final class FCMClient: Sendable {
    public struct Configuration: Sendable {
        /// What its metrics name it by (the app's name).
        public var name = "fcm"
        /// `https://fcm.googleapis.com`, or a mock's or a gateway's base URL.
        public var baseURL = "https://fcm.googleapis.com"
        /// PEM roots to trust instead of the system's (a mock's, a gateway's); nil uses the system's.
        public var caFile: String?
        /// The app's egress proxy (`http://`, `https://`; `socks5://` with the curl transport),
        /// for FCM and its token endpoint alike.
        public var proxy: String?
        public var transport: APNsTransport = .nghttp2
        /// FCM serves about 100 streams a connection: more connections, not more streams.
        public var connections = 4
        public var maxConcurrentStreams = 100
        public var requestTimeout: Duration = .seconds(15)
        public var connectTimeout: Duration = .seconds(10)
        public var transportRetries = 3

        public init() {}
    }

    public typealias Answer = FCMAnswer

    /// One device's answer, and how many times its request went again after a connection was
    /// lost (or a stream refused) before FCM answered: a request lost with its connection may
    /// have been delivered, so the device may show the message twice, and its result's `attempts`
    /// counts each send. (A request sent again with a new access token after a 401 is not
    /// counted: FCM delivered nothing.)
    public struct Reply: Sendable, Equatable {
        public var answer: FCMAnswer
        public var resent: Int

        public init(_ answer: FCMAnswer, resent: Int = 0) {
            self.answer = answer
            self.resent = resent
        }
    }

    public let configuration: Configuration
    public let tokens: FCMAccessTokenSource
    private let pool: APNsConnectionPool
    private let path: String
    private let latency: CoreMetrics.Timer
    /// FCM's 429s (the project's or a device's quota) and its 401s (the access token refused),
    /// each answer counted, retried or not: what a quota or credentials alert watches.
    private let quotaExceeded: CoreMetrics.Counter
    private let tokenRefused: CoreMetrics.Counter
    /// Requests sent again: after a lost connection or a refused stream (`connection`: FCM may
    /// have delivered the first one), or with a new access token (`access_token`), as APNs'.
    private let resendsAfterConnectionLoss: CoreMetrics.Counter
    private let resendsWithNewToken: CoreMetrics.Counter
    private let logger: Logger

    public init(configuration: Configuration, tokens: FCMAccessTokenSource, logger: Logger = Logger(label: "pushworker.fcm")) {
        self.configuration = configuration
        self.tokens = tokens
        self.logger = logger
        path = "/v1/projects/\(tokens.account.projectID)/messages:send"
        var engine = APNsClientConfiguration(baseURL: configuration.baseURL, authentication: .none)
        engine.name = configuration.name
        engine.caFile = configuration.caFile
        engine.proxy = configuration.proxy
        engine.transport = configuration.transport
        engine.connections = configuration.connections
        engine.maxConcurrentStreams = configuration.maxConcurrentStreams
        engine.requestTimeout = configuration.requestTimeout
        engine.connectTimeout = configuration.connectTimeout
        engine.transportRetries = configuration.transportRetries
        pool = APNsConnectionPool(configuration: engine)
        latency = CoreMetrics.Timer(label: "pushworker_fcm_request_duration_seconds", dimensions: [("app", configuration.name)])
        quotaExceeded = CoreMetrics.Counter(label: "pushworker_fcm_quota_exceeded_total", dimensions: [("app", configuration.name)])
        tokenRefused = CoreMetrics.Counter(label: "pushworker_fcm_access_token_refused_total", dimensions: [("app", configuration.name)])
        resendsAfterConnectionLoss = CoreMetrics.Counter(
            label: "pushworker_fcm_resends_total", dimensions: [("app", configuration.name), ("cause", "connection")])
        resendsWithNewToken = CoreMetrics.Counter(
            label: "pushworker_fcm_resends_total", dimensions: [("app", configuration.name), ("cause", "access_token")])
    }

    deinit {
        pool.shutdown()
    }

    /// Finishes the requests in flight, then closes the connections.
    public func shutdown() {
        pool.shutdown()
        Task { [tokens] in await tokens.stop() }
    }

    /// Connections with a socket open now.
    public var openConnections: Int { pool.connections.count { $0.isOpen } }

    /// Requests sent and not yet answered.
    public var requestsInFlight: Int { pool.streamsInUse }

    /// Sends `message` to each of `devices`; one answer per device, in their order. A token
    /// that is not base64url and colons is answered `INVALID_ARGUMENT` here, unsent: it is
    /// spliced into the request's JSON, where a quote would add members of its own.
    public func send(_ message: FCMMessage.Encoded, to devices: [String]) async -> [Answer] {
        await replies(message, to: devices).map(\.answer)
    }

    /// As `send`, with each device's re-sends after a lost connection.
    public func replies(_ message: FCMMessage.Encoded, to devices: [String]) async -> [Reply] {
        var answers = [Answer?](repeating: nil, count: devices.count)
        let round = APNsExchangeRound(count: devices.count, pool: pool, latency: latency, baseURL: configuration.baseURL, coldOn403: false)
        var toSend: [Int] = []
        toSend.reserveCapacity(devices.count)
        for index in devices.indices {
            if Self.isSafe(devices[index]) {
                toSend.append(index)
            } else {
                answers[index] = .failed(.invalidToken("not an FCM registration token (base64url and colons only)"))
            }
        }
        var transportRetries: [Int: Int] = [:]
        var renewed = Set<Int>()
        /// Devices queued to go again, and why (true: a lost connection); counted once sent.
        var resending: [Int: Bool] = [:]
        /// The access token each request went with: a late 401 drops only the token it refused.
        var sentWith = [String](repeating: "", count: devices.count)
        var outstanding = 0
        while true {
            if !toSend.isEmpty {
                let bearer: String
                do {
                    bearer = try await tokens.token().value
                } catch {
                    for index in toSend {
                        answers[index] = .unanswered("no FCM access token: \(error)")
                        // Queued again, never sent.
                        if let resent = transportRetries[index], resent > 0 { transportRetries[index] = resent - 1 }
                        resending[index] = nil
                    }
                    toSend = []
                    if outstanding == 0 { break }
                    continue
                }
                for index in toSend {
                    sentWith[index] = bearer
                    if let cause = resending.removeValue(forKey: index) {
                        (cause ? resendsAfterConnectionLoss : resendsWithNewToken).increment()
                    }
                }
                await start(toSend, of: devices, message: message, bearer: bearer, round: round)
                outstanding += toSend.count
                toSend = []
            }
            guard outstanding > 0 else { break }
            let wave = await round.nextWave()
            outstanding -= wave.count
            var refused = Set<String>()
            for (index, outcome) in wave {
                switch outcome {
                case .response(200, _, _, _, _, let body):
                    answers[index] = .accepted(name: FCMMessage.name(inAnswer: body) ?? "")
                case .response(let status, _, _, _, let retryAfter, let body):
                    let failure = FCMFailure(status: status, retryAfter: retryAfter, body: body)
                    if status == 429 { quotaExceeded.increment() } else if status == 401 { tokenRefused.increment() }
                    if status == 401, case .credentials(code: "UNAUTHENTICATED", _) = failure, !renewed.contains(index) {
                        // The access token was refused (revoked, or lapsed on the way): once more with a new one.
                        renewed.insert(index)
                        refused.insert(sentWith[index])
                        resending[index] = false
                        toSend.append(index)
                    } else {
                        answers[index] = .failed(failure)
                    }
                case .failure(let error, let retry):
                    let attempts = transportRetries[index, default: 0]
                    if retry, attempts < configuration.transportRetries {
                        transportRetries[index] = attempts + 1
                        resending[index] = true
                        toSend.append(index)
                    } else {
                        answers[index] = .unanswered(error.description)
                    }
                }
            }
            for bearer in refused {
                await tokens.invalidate(bearer)
                logger.notice("FCM refused the access token; asking for a new one", metadata: ["project": "\(tokens.account.projectID)"])
            }
        }
        return devices.indices.map { Reply(answers[$0] ?? .unanswered("no answer"), resent: transportRetries[$0] ?? 0) }
    }

    /// Whether `token` can be spliced into JSON as it is: base64url and colons, as registration tokens are.
    static func isSafe(_ token: String) -> Bool {
        !token.isEmpty && token.utf8.allSatisfy { byte in
            (65...90).contains(byte) || (97...122).contains(byte) || (48...57).contains(byte) || byte == 45 || byte == 95 || byte == 58
        }
    }

    /// Hands the devices at `indices` to the connections the pool picks, each connection's share
    /// as one batch of requests with bodies of their own.
    private func start(_ indices: [Int], of devices: [String], message: FCMMessage.Encoded, bearer: String, round: APNsExchangeRound) async {
        let headers = [("content-type", "application/json; charset=UTF-8"), ("authorization", "Bearer \(bearer)")]
        var start = 0
        while start < indices.count {
            let (connection, count) = await pool.acquire(upTo: indices.count - start)
            let slots = indices[start..<(start + count)]
            start += count
            round.assign(slots, to: connection)
            var batch = APNsExchangeBatch(headers: headers, ownBodies: count, bodyBytes: count * (message.size + 200))
            for index in slots { batch.append(path: path, tag: index) { message.append(token: devices[index], to: &$0) } }
            pool.connections[connection].start(batch, round: round)
        }
    }
}
