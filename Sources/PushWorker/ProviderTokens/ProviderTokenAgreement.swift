import AMQP
import APNs
import FCM
import FCMHTTP2
import Foundation
import Logging

/// One provider token per signing key for the whole fleet, agreed over a fanout exchange, so APNs
/// sees one token every 45 minutes however many workers run (Apple answers a team whose token
/// changes too often with TooManyProviderTokenUpdates).
///
/// Each worker listens on a queue of its own bound to the exchange. Starting, it asks the fleet
/// for its tokens and takes the one `ProviderTokenChoice` picks; when none answers, it signs a
/// candidate, publishes it, listens a moment for rival candidates (a fleet starting at once) and
/// takes the pick. At 45 minutes (plus a little jitter, so one worker is first) the token is
/// refreshed the same way, the others adopting the candidate they hear. A token APNs calls expired
/// is replaced at once where that happens (`ProviderTokenSource.replace`), published as
/// superseding the old one, and adopted by the others at once. A worker that hears nothing (no
/// broker) signs its own at 50 minutes, as it would alone.
///
/// The tokens are bearer credentials for under an hour: they are never logged, and they travel
/// only through the broker the worker's jobs already trust. Only tokens signed by the worker's own
/// key for its own team are adopted (`ProviderTokenSource.verified`).
///
/// FCM access tokens go the same way, one per service account for the fleet: a worker tells
/// the others of each token Google grants it, answers a worker starting with the one it holds,
/// and adopts a token heard for an account of its own that lasts longer than its own. Nothing
/// needs deciding there (any valid token serves, and workers renew at different moments,
/// `FCMAccessTokenSource.renewalMargin`), so the fleet asks Google about once per token's life.
/// An access token is Google's opaque string and cannot be checked: one FCM refuses is dropped
/// and replaced by the worker's own grant.
public actor ProviderTokenAgreement {
    /// How long a worker listens for the fleet's tokens before it decides: the answers to its
    /// question at start, the rival candidates of a refresh. A message through the broker takes
    /// milliseconds; the rest is room for a loaded host.
    static let settle: Duration = .milliseconds(1500)
    static let tokenType = "provider-token"
    static let queryType = "provider-token-query"
    static let fcmTokenType = "fcm-access-token"
    static let fcmQueryType = "fcm-access-token-query"

    private let sources: [String: ProviderTokenSource]
    /// FCM's token sources, by service account (`client_email` and `token_uri`, `fcmKey`):
    /// more than one where apps on one account reach Google differently (a proxy each).
    private let fcm: [String: [FCMAccessTokenSource]]
    private let publisher: AMQPPublisher
    private let consumer: AMQPConsumer
    private let exchange: String
    private let logger: Logger
    /// What is known and decided; this actor carries out its actions.
    private var state = ProviderTokenAgreementState(settle: ProviderTokenAgreement.settle)
    private var refreshes: [String: Task<Void, Never>] = [:]
    private var listener: Task<Void, Never>?

    private init(
        sources: [String: ProviderTokenSource], fcm: [String: [FCMAccessTokenSource]], publisher: AMQPPublisher, consumer: AMQPConsumer, exchange: String,
        logger: Logger
    ) {
        self.sources = sources
        self.fcm = fcm
        self.publisher = publisher
        self.consumer = consumer
        self.exchange = exchange
        self.logger = logger
    }

    static func name(of source: ProviderTokenSource) -> String { "\(source.teamID).\(source.keyID)" }
    /// An access token serves the account it was granted to, from the endpoint that granted it
    /// (a mock's token is no use to Google).
    static func fcmKey(_ account: String, _ tokenURI: String) -> String { "\(account) \(tokenURI)" }
    static func name(of token: ProviderToken) -> String { "\(token.teamID).\(token.keyID)" }

    /// Joins the fleet's agreement for `sources` (one per key) and returns once each has a token.
    /// - Parameters:
    ///   - fcm: FCM access token sources (one per service account), given the fleet's token if
    ///     one answers while the provider tokens are agreed on.
    ///   - amqp: the broker; its topology is replaced by this worker's own queue on `exchange`.
    ///   - publisher: confirmed publisher for the tokens and the question.
    public static func start(
        sources: [ProviderTokenSource], fcm: [FCMAccessTokenSource] = [], amqp: AMQPConfiguration, exchange: String, publisher: AMQPPublisher,
        logger: Logger
    ) async throws -> ProviderTokenAgreement {
        var configuration = amqp
        // (Not the host name: Foundation may look it up in DNS.)
        let queue = "\(exchange).worker-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8).lowercased())"
        configuration.topology = AMQPTopology(
            exchanges: [.init(exchange, type: "fanout")],
            queues: [.init(queue, durable: false, exclusive: true, autoDelete: true)],
            bindings: [.init(queue: queue, exchange: exchange, routingKey: "")])
        let consumer = try await AMQPConsumer.connect(configuration, queue: queue, prefetch: 64, logger: logger)
        let agreement = ProviderTokenAgreement(
            sources: Dictionary(sources.map { (name(of: $0), $0) }, uniquingKeysWith: { first, _ in first }),
            fcm: Dictionary(grouping: fcm, by: { fcmKey($0.account.clientEmail, $0.account.tokenURI) }),
            publisher: publisher, consumer: consumer, exchange: exchange, logger: logger)
        await agreement.join()
        return agreement
    }

    /// Listens, asks, and settles on a first token per key.
    private func join() async {
        listener = Task { [consumer] in
            do {
                for try await delivery in consumer {
                    try? await delivery.ack()
                    await self.handle(delivery.body, properties: delivery.properties)
                }
            } catch {
                logger.warning("the provider token listener stopped; each key's token is signed here from now on", metadata: ["error": "\(error)"])
            }
        }
        for source in sources.values {
            source.onSignedHere { [weak self] signed in
                Task { await self?.signedHere(signed) }
            }
        }
        for source in fcm.values.joined() {
            let (account, tokenURI) = (source.account.clientEmail, source.account.tokenURI)
            await source.onGranted { [weak self] token in
                Task { await self?.publish(token, of: account, at: tokenURI) }
            }
        }
        if !fcm.isEmpty {
            await publish(AMQPMessage(exchange: exchange, routingKey: "", body: [], properties: AMQPProperties(type: Self.fcmQueryType)))
        }
        guard !sources.isEmpty else { return }  // FCM's tokens need no decision: a worker goes on at once
        await publish(AMQPMessage(exchange: exchange, routingKey: "", body: [], properties: AMQPProperties(type: Self.queryType)))
        try? await Task.sleep(for: Self.settle)
        var unanswered: [String] = []
        for name in sources.keys.sorted() {
            if !(await decide(name)) { unanswered.append(name) }
        }
        guard !unanswered.isEmpty else { return }
        // No worker holds a fresh token: offer one each, and take the pick among the rivals.
        for name in unanswered { await offerCandidate(for: name) }
        try? await Task.sleep(for: Self.settle)
        for name in unanswered { await decide(name) }
    }

    /// Stops listening; the tokens in use stay.
    public func stop() async {
        listener?.cancel()
        for task in refreshes.values { task.cancel() }
        refreshes = [:]
        await consumer.close()
    }

    private func handle(_ body: [UInt8], properties: AMQPProperties) async {
        switch properties.type {
        case Self.queryType:
            await perform(state.queried(sources.mapValues(Self.key)))
        case Self.tokenType:
            let jwt = String(decoding: body, as: UTF8.self)
            guard let (name, source, token) = sources.lazy.compactMap({ name, source in source.verified(jwt).map { (name, source, $0) } }).first else {
                return  // another key's (or not a token of ours): never adopted
            }
            await perform(state.heard(token, key: name, Self.key(source), supersedes: properties.headers?[WireHeader.supersedes]?.intValue))
        case Self.fcmQueryType:
            for sources in fcm.values {
                // One answer per account: the longest-lasting token held for it here.
                var best: FCMAccessToken?
                for source in sources {
                    if let token = await source.shareable(), token.expiresAt > best?.expiresAt ?? .distantPast { best = token }
                }
                if let best, let account = sources.first?.account { await publish(best, of: account.clientEmail, at: account.tokenURI) }
            }
        case Self.fcmTokenType:
            guard let account = properties.headers?[WireHeader.fcmAccount]?.stringValue,
                let tokenURI = properties.headers?[WireHeader.fcmTokenURI]?.stringValue, let sources = fcm[Self.fcmKey(account, tokenURI)],
                let expiresAt = properties.headers?[WireHeader.fcmExpiresAt]?.intValue, !body.isEmpty
            else { return }  // another account's, or another endpoint's: never adopted
            let token = FCMAccessToken(value: String(decoding: body, as: UTF8.self), expiresAt: Date(timeIntervalSince1970: TimeInterval(expiresAt)))
            for source in sources { await source.adopt(token) }
        default:
            break
        }
    }

    private static func key(_ source: ProviderTokenSource) -> ProviderTokenAgreementState.Key {
        ProviderTokenAgreementState.Key(installed: source.installed, now: source.now)
    }

    /// Adopts the pick of what was heard for `name`; false when nothing fresh is known.
    @discardableResult
    private func decide(_ name: String) async -> Bool {
        guard let source = sources[name] else { return false }
        let (decided, actions) = state.decide(key: name, Self.key(source), refreshing: refreshes[name] != nil, at: .now)
        await perform(actions)
        return decided
    }

    /// Carries out what the state decided, in order.
    private func perform(_ actions: [ProviderTokenAgreementState.Action]) async {
        for action in actions {
            switch action {
            case .publish(let token, let replaced):
                await publish(token, superseding: replaced)
            case .adopt(let name, let token, let installed, let reason):
                // Not over a token this worker signed meanwhile because APNs refused the old
                // one: that one is being published, and the fleet picks again.
                guard let source = sources[name], source.adopt(token, replacing: installed) else { continue }
                logger.info("provider token adopted", metadata: ["key_id": "\(source.keyID)", "issued_at": "\(token.iat)", "reason": "\(reason)"])
                scheduleRefresh(name)
            case .decideLater(let name):
                Task {
                    try? await Task.sleep(for: Self.settle)
                    await self.decide(name)
                }
            case .scheduleRefresh(let name):
                scheduleRefresh(name)
            case .offerCandidate(let name):
                await offerCandidate(for: name)
            case .announce(let token):
                Task { await self.publish(token) }
            }
        }
    }

    /// Signs a candidate for `name`, publishes it and counts it among those heard.
    private func offerCandidate(for name: String) async {
        guard let source = sources[name] else { return }
        do {
            let candidate = try source.signCandidate()
            state.offered(candidate, key: name)
            await publish(candidate)
        } catch {
            logger.error("cannot sign a provider token", metadata: ["key_id": "\(source.keyID)", "error": "\(error)"])
        }
    }

    /// At 45 minutes (and up to a minute more, so that one worker is usually first), offers a
    /// candidate unless another worker's has come meanwhile.
    private func scheduleRefresh(_ name: String) {
        refreshes[name]?.cancel()
        guard let source = sources[name], let token = source.installed else {
            refreshes[name] = nil
            return
        }
        let due = token.issuedAt.timeIntervalSince(source.now) + ProviderTokenChoice.refreshAge + Double.random(in: 0..<60)
        refreshes[name] = Task {
            do { try await Task.sleep(for: .milliseconds(Int64(max(0, due) * 1000))) } catch { return }
            await self.refresh(name, from: token)
        }
    }

    private func refresh(_ name: String, from token: ProviderToken) async {
        refreshes[name] = nil
        guard let source = sources[name] else { return }
        await perform(state.refreshDue(key: name, from: token, Self.key(source)))
    }

    /// The source signed a token itself: tell the fleet.
    private func signedHere(_ signed: ProviderTokenSource.SignedHere) async {
        await perform(state.signedHere(
            key: Self.name(of: signed.fresh), fresh: signed.fresh, replaced: signed.replaced, afterRefusal: signed.replacedAfterRefusal))
    }

    private func publish(_ token: ProviderToken, superseding replaced: ProviderToken? = nil) async {
        var headers: AMQPTable = [:]
        if let replaced { headers[WireHeader.supersedes] = .int64(replaced.iat) }
        await publish(AMQPMessage(
            exchange: exchange, routingKey: "", body: Array(token.jwt.utf8),
            properties: AMQPProperties(headers: headers.isEmpty ? nil : headers, type: Self.tokenType)))
    }

    /// Tells the fleet of an FCM access token (this worker's own grant, or to a worker starting).
    private func publish(_ token: FCMAccessToken, of account: String, at tokenURI: String) async {
        let headers: AMQPTable = [
            WireHeader.fcmAccount: .string(account), WireHeader.fcmTokenURI: .string(tokenURI),
            WireHeader.fcmExpiresAt: .int64(Int64(token.expiresAt.timeIntervalSince1970)),
        ]
        await publish(AMQPMessage(
            exchange: exchange, routingKey: "", body: Array(token.value.utf8), properties: AMQPProperties(headers: headers, type: Self.fcmTokenType)))
    }

    private func publish(_ message: AMQPMessage) async {
        do {
            try await publisher.publish(message)
        } catch {
            logger.warning("cannot tell the fleet of a provider token; workers may use their own until the broker is back", metadata: ["error": "\(error)"])
        }
    }
}

extension ProviderToken {
    /// The `iat` claim: names a token in logs and in `x-pushworker-supersedes-iat`.
    var iat: Int64 { Int64(issuedAt.timeIntervalSince1970) }
}
