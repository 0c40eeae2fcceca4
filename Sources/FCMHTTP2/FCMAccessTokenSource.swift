import APNsHTTP2
import CCurl
import FCM
import Foundation
import Logging
import Metrics

/// Trades a service account's grant for access tokens at its token endpoint and keeps the
/// current one, renewed before it lapses: one grant per period, never one per message (rpush
/// asked for a token per notification). Callers that need a token while a grant is on its way
/// wait for that one; while the current token is still good, they get it and the renewal runs
/// behind them, so a token endpoint that is slow or briefly away holds up no message. A refusal
/// is the app's credentials failing: said once in the log with Google's words and held for
/// `retryAfterRefusal`, so a wrong key is an alarm and not a storm of grants.
///
/// A fleet shares one token per service account (`adopt`, `onGranted`): each worker renews a
/// little earlier or later than the others (`renewalMargin`), so the first to renew tells the
/// rest, which take its token instead of asking Google again.
public actor FCMAccessTokenSource {
    public nonisolated let account: FCMServiceAccount
    private let caFile: String?
    private let proxy: String?
    private let timeout: Duration
    private let logger: Logger
    private var current: FCMAccessToken?
    private var pending: Task<Result<FCMAccessToken, FCMAuthError>, Never>?
    /// The last grant's failure, and when: a refusal is held `retryAfterRefusal`, an endpoint
    /// that could not be reached `retryAfterUnreachable`.
    private var failed: (error: FCMAuthError, at: Date)?
    /// Tokens FCM refused here, until they would have lapsed: never adopted again.
    private var refused: [String: Date] = [:]
    /// Asks again every `retryAfterRefusal` while the grant is refused, so a key put right is
    /// seen (and `/readyz` turns) without waiting for a message to an Android device.
    private var recheck: Task<Void, Never>?
    /// Grants asked for since the start (for the gauges and the tests).
    public private(set) var grants = 0
    /// How long before its end the token is renewed: five minutes and up to one more, drawn once
    /// per source, so that in a fleet one worker renews first and the others adopt its token.
    public let renewalMargin: TimeInterval
    /// Grants by outcome (`granted`, `refused`, `unreachable`), tokens adopted from the fleet, and
    /// 1 while the account's last grant was refused: what an operator's alert watches.
    private let grantCounters: [String: CoreMetrics.Counter]
    private let adoptedCounter: CoreMetrics.Counter
    private let refusedGauge: CoreMetrics.Gauge
    /// Told of each token granted here (to tell the fleet).
    private var granted: (@Sendable (FCMAccessToken) -> Void)?

    /// How long a refused grant is not asked again.
    public static let retryAfterRefusal: TimeInterval = 30
    /// How long after a token endpoint could not be reached it is not asked again.
    public static let retryAfterUnreachable: TimeInterval = 5
    /// A token with less than this left is not handed out: a message would reach FCM after it lapsed.
    public static let lastUse: TimeInterval = 30
    /// The longest a token heard from the fleet may have left: Google's hour, and a minute of clocks.
    public static let longestLife: TimeInterval = 3660

    /// - Parameters:
    ///   - caFile: PEM roots to trust for the token endpoint instead of the system's (a mock's).
    ///   - proxy: the proxy the token endpoint is reached through (the app's).
    public init(
        account: FCMServiceAccount, caFile: String? = nil, proxy: String? = nil, timeout: Duration = .seconds(10),
        renewalMargin: TimeInterval = 300 + .random(in: 0..<60), logger: Logger = Logger(label: "pushworker.fcm")
    ) {
        self.account = account
        self.renewalMargin = renewalMargin
        // By account as well as project: two service accounts of one project are two credentials.
        let labels = [("project", account.projectID), ("account", account.clientEmail)]
        grantCounters = Dictionary(uniqueKeysWithValues: ["granted", "refused", "unreachable"].map {
            ($0, CoreMetrics.Counter(label: "pushworker_fcm_grants_total", dimensions: labels + [("result", $0)]))
        })
        adoptedCounter = CoreMetrics.Counter(label: "pushworker_fcm_access_tokens_adopted_total", dimensions: labels)
        refusedGauge = CoreMetrics.Gauge(label: "pushworker_fcm_credentials_refused", dimensions: labels)
        refusedGauge.record(0)
        self.caFile = caFile
        self.proxy = proxy
        self.timeout = timeout
        self.logger = logger
    }

    /// A token good for at least `lastUse` more seconds; renewed `renewalMargin` before its end.
    public func token(now: Date = Date()) async throws(FCMAuthError) -> FCMAccessToken {
        if let current, !current.needsRenewal(at: now, margin: renewalMargin) { return current }
        let usable = current.flatMap { $0.expiresAt.timeIntervalSince(now) > Self.lastUse ? $0 : nil }
        if let failed {
            let hold = if case .refused = failed.error { Self.retryAfterRefusal } else { Self.retryAfterUnreachable }
            if now.timeIntervalSince(failed.at) < hold {
                if let usable { return usable }
                throw failed.error
            }
        }
        let task = pending ?? startGrant()
        if let usable { return usable }
        return try await outcome(of: task)
    }

    /// Forgets `token` (FCM answered 401 with it): the next call asks for a new one, and the
    /// fleet's workers that still hold it cannot hand it back (`adopt`) while it would last.
    public func invalidate(_ token: String, now: Date = Date()) {
        if current?.value == token {
            refused[token] = current?.expiresAt
            current = nil
        } else {
            refused[token] = refused[token] ?? now.addingTimeInterval(Self.longestLife)
        }
        refused = refused.filter { $0.value > now }
    }

    /// A token another worker was granted for this account, heard through the broker: taken
    /// when it lasts longer than the one held, so no grant is asked for here. It cannot be
    /// checked (it is Google's opaque string); one FCM refuses is dropped like any other
    /// (`invalidate`) and a grant of this worker's own replaces it.
    ///
    /// Not taken: one FCM refused here, one lasting longer than Google grants (`longestLife`: a
    /// clock far off, or not Google's), or one that is not a bearer token's characters. A
    /// refused grant stays said (`refusal`) while the fleet's token serves: this worker's key is
    /// still refused.
    @discardableResult
    public func adopt(_ token: FCMAccessToken, now: Date = Date()) -> Bool {
        let life = token.expiresAt.timeIntervalSince(now)
        guard life > Self.lastUse, life <= Self.longestLife, token.expiresAt > current?.expiresAt ?? .distantPast, refused[token.value] == nil,
            !token.value.isEmpty, token.value.utf8.count <= 4096, token.value.utf8.allSatisfy({ (33...126).contains($0) })
        else { return false }
        current = token
        adoptedCounter.increment()
        logger.info("FCM access token adopted from the fleet", metadata: ["project": "\(account.projectID)", "expires_at": "\(token.expiresAt)"])
        return true
    }

    /// The token held, when it is not yet due for renewal: what a worker starting is told.
    public func shareable(now: Date = Date()) -> FCMAccessToken? {
        current.flatMap { $0.needsRenewal(at: now, margin: renewalMargin) ? nil : $0 }
    }

    /// Why the account's credentials fail, while its last grant was refused (for `/readyz`): nil
    /// once a grant succeeds or a token is adopted, and while the endpoint is only unreachable.
    public var refusal: String? {
        guard let failed, case .refused = failed.error else { return nil }
        return failed.error.description
    }

    /// Calls `handler` with each token granted here from now on.
    public func onGranted(_ handler: @escaping @Sendable (FCMAccessToken) -> Void) {
        granted = handler
    }

    private func scheduleRecheck() {
        recheck?.cancel()
        recheck = Task { [weak self] in
            try? await Task.sleep(for: .seconds(Self.retryAfterRefusal))
            guard !Task.isCancelled, let self else { return }
            await self.recheckRefusal()
        }
    }

    private func recheckRefusal() {
        guard refusal != nil, pending == nil else { return }
        _ = startGrant()
    }

    /// Stops asking again for a refused grant (the worker is stopping).
    public func stop() {
        recheck?.cancel()
        recheck = nil
    }

    /// Starts a grant; its outcome is kept whether or not anyone waits for it.
    private func startGrant() -> Task<Result<FCMAccessToken, FCMAuthError>, Never> {
        let (account, caFile, proxy, timeout) = (account, caFile, proxy, timeout)
        grants += 1
        let task = Task { await Self.grant(account, caFile: caFile, proxy: proxy, timeout: timeout) }
        pending = task
        Task { _ = try? await self.outcome(of: task) }
        return task
    }

    private func outcome(of task: Task<Result<FCMAccessToken, FCMAuthError>, Never>) async throws(FCMAuthError) -> FCMAccessToken {
        let result = await task.value
        if pending == task {
            pending = nil
            switch result {
            case .success(let token):
                if token.expiresAt > current?.expiresAt ?? .distantPast { current = token }
                failed = nil
                grantCounters["granted"]?.increment()
                refusedGauge.record(0)
                granted?(token)
                logger.info("FCM access token granted", metadata: ["project": "\(account.projectID)", "expires_at": "\(token.expiresAt)"])
            case .failure(let error):
                failed = (error, Date())
                if case .refused = error {
                    grantCounters["refused"]?.increment()
                    refusedGauge.record(1)
                    scheduleRecheck()
                    logger.error("FCM refused the service account's grant; no message is sent until it is fixed", metadata: [
                        "project": "\(account.projectID)", "client_email": "\(account.clientEmail)", "error": "\(error)",
                    ])
                } else {
                    grantCounters["unreachable"]?.increment()
                    logger.warning("the FCM token endpoint could not be reached; asked again shortly", metadata: [
                        "project": "\(account.projectID)", "error": "\(error)",
                    ])
                }
            }
        }
        return try result.get()
    }

    private static func grant(_ account: FCMServiceAccount, caFile: String?, proxy: String?, timeout: Duration) async -> Result<FCMAccessToken, FCMAuthError> {
        let assertion: String
        do {
            assertion = try await FCMGrant.assertion(account)
        } catch {
            return .failure(.refused("cannot sign the grant with the service account's key: \(error)"))
        }
        let milliseconds = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let outcome = await CurlEasyExchange.perform(
            .post, url: account.tokenURI, headers: ["content-type: application/x-www-form-urlencoded", "accept: application/json"],
            body: FCMGrant.formBody(assertion: assertion), threadName: "fcm-token",
            configure: { easy in
                // The token endpoint speaks HTTP/1.1 or HTTP/2, whichever TLS agrees.
                _ = pw_curl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, milliseconds)
                _ = pw_curl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, milliseconds)
                if let caFile { _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_CAINFO, caFile) }
                if let proxy { _ = pw_curl_easy_setopt_pointer(easy, CURLOPT_PROXY, proxy) }
            })
        switch outcome {
        case .failure(let failure):
            return .failure(.unreachable("\(account.tokenURI): \(failure.message)"))
        case .success(let answer) where answer.status == 200:
            do {
                return .success(try FCMAccessToken(response: answer.body))
            } catch {
                return .failure(.refused(error.message))
            }
        case .success(let answer) where answer.status >= 500 || answer.status == 429:
            return .failure(.unreachable("\(account.tokenURI) answered \(answer.status)"))
        case .success(let answer):
            let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any]
            let reason = [object?["error"] as? String, object?["error_description"] as? String].compactMap { $0 }.joined(separator: ": ")
            return .failure(.refused("\(account.tokenURI) answered \(answer.status)\(reason.isEmpty ? "" : ": \(reason)")"))
        }
    }
}

/// Why no access token could be had.
public enum FCMAuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The token endpoint refused the grant (a wrong or revoked key, an unknown account, a
    /// clock far off): the app's credentials are wrong; an alarm.
    case refused(String)
    /// The token endpoint could not be reached, or was unwell (5xx, 429): tried again later.
    case unreachable(String)

    public var description: String {
        switch self {
        case .refused(let message): "grant refused: \(message)"
        case .unreachable(let message): "token endpoint unreachable: \(message)"
        }
    }
}
