import AMQP
import APNs
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
public actor ProviderTokenAgreement {
    /// How long a worker listens for the fleet's tokens before it decides: the answers to its
    /// question at start, the rival candidates of a refresh. A message through the broker takes
    /// milliseconds; the rest is room for a loaded host.
    static let settle: Duration = .milliseconds(1500)
    static let tokenType = "provider-token"
    static let queryType = "provider-token-query"

    private let sources: [String: ProviderTokenSource]
    private let publisher: AMQPPublisher
    private let consumer: AMQPConsumer
    private let exchange: String
    private let logger: Logger
    /// Candidates heard since the last decision, per key.
    private var heard: [String: [ProviderToken]] = [:]
    /// `iat`s of tokens APNs called expired somewhere in the fleet, per key: never picked again.
    private var superseded: [String: Set<Int64>] = [:]
    /// When this worker last re-announced its token for a key that lost to it.
    private var announced: [String: ContinuousClock.Instant] = [:]
    private var deciding: Set<String> = []
    private var refreshes: [String: Task<Void, Never>] = [:]
    private var listener: Task<Void, Never>?

    private init(sources: [String: ProviderTokenSource], publisher: AMQPPublisher, consumer: AMQPConsumer, exchange: String, logger: Logger) {
        self.sources = sources
        self.publisher = publisher
        self.consumer = consumer
        self.exchange = exchange
        self.logger = logger
    }

    static func name(of source: ProviderTokenSource) -> String { "\(source.teamID).\(source.keyID)" }
    static func name(of token: ProviderToken) -> String { "\(token.teamID).\(token.keyID)" }

    /// Joins the fleet's agreement for `sources` (one per key) and returns once each has a token.
    /// - Parameters:
    ///   - amqp: the broker; its topology is replaced by this worker's own queue on `exchange`.
    ///   - publisher: confirmed publisher for the tokens and the question.
    public static func start(
        sources: [ProviderTokenSource], amqp: AMQPConfiguration, exchange: String, publisher: AMQPPublisher, logger: Logger
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
        await publish(AMQPMessage(exchange: exchange, routingKey: "", body: [], properties: AMQPProperties(type: Self.queryType)))
        try? await Task.sleep(for: Self.settle)
        var unanswered: [String] = []
        for name in sources.keys {
            if !decide(name) { unanswered.append(name) }
        }
        guard !unanswered.isEmpty else { return }
        // No worker holds a fresh token: offer one each, and take the pick among the rivals.
        for name in unanswered { await offerCandidate(for: name) }
        try? await Task.sleep(for: Self.settle)
        for name in unanswered { _ = decide(name) }
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
            // A worker starting: tell it the tokens in use here, and the candidates still being
            // decided on (it may have missed them, and would otherwise offer a rival too late).
            for (name, source) in sources {
                let known = [source.installed].compactMap { $0 } + (heard[name] ?? [])
                for token in Set(known) where ProviderTokenChoice.isFresh(token, now: source.now) { await publish(token) }
            }
        case Self.tokenType:
            let jwt = String(decoding: body, as: UTF8.self)
            guard let (name, source, token) = sources.lazy.compactMap({ name, source in source.verified(jwt).map { (name, source, $0) } }).first else {
                return  // another key's (or not a token of ours): never adopted
            }
            let installed = source.installed
            guard token.jwt != installed?.jwt else { return }
            if let old = properties.headers?[WireHeader.supersedes]?.intValue {
                superseded[name, default: []].insert(old)
                if let installed, installed.iat == old, ProviderTokenChoice.isFresh(token, now: source.now) {
                    // APNs called the token in use expired where the other worker sent: take its
                    // replacement now, before this worker's requests are refused too.
                    adopt(token, into: source, replacing: installed, name: name, because: "it replaces the token APNs called expired")
                    return
                }
            }
            heard[name, default: []].append(token)
            scheduleDecision(name)
        default:
            break
        }
    }

    /// Adopts the pick of what was heard for `name`; false when nothing fresh is known.
    @discardableResult
    private func decide(_ name: String) -> Bool {
        deciding.remove(name)
        guard let source = sources[name] else { return false }
        let installed = source.installed
        let void = superseded[name] ?? []
        let candidates = (heard.removeValue(forKey: name) ?? []).filter { !void.contains($0.iat) }
        let current = installed.flatMap { void.contains($0.iat) ? nil : $0 }
        guard let chosen = ProviderTokenChoice.pick(current: current, heard: candidates, now: source.now) else { return false }
        if chosen.jwt != installed?.jwt {
            adopt(chosen, into: source, replacing: installed, name: name, because: installed == nil ? "the fleet's token" : "the fleet's pick")
        } else {
            if refreshes[name] == nil { scheduleRefresh(name) }
            if candidates.contains(where: { $0.jwt != chosen.jwt }) { Task { await self.announce(name) } }
        }
        return true
    }

    /// Publishes the token in use here again, at most once per settling time: a worker that
    /// offered a rival (it missed this one: a reconnect, a clock a little behind) hears the
    /// token that wins over its own and takes it.
    private func announce(_ name: String) async {
        guard let source = sources[name], let token = source.installed, ProviderTokenChoice.isFresh(token, now: source.now) else { return }
        if let last = announced[name], ContinuousClock.now - last < Self.settle { return }
        announced[name] = .now
        await publish(token)
    }

    private func scheduleDecision(_ name: String) {
        guard deciding.insert(name).inserted else { return }
        Task {
            try? await Task.sleep(for: Self.settle)
            self.decide(name)
        }
    }

    private func adopt(_ token: ProviderToken, into source: ProviderTokenSource, replacing installed: ProviderToken?, name: String, because reason: String) {
        // Not over a token this worker signed meanwhile because APNs refused the old one: that
        // one is being published, and the fleet picks again.
        guard source.adopt(token, replacing: installed) else { return }
        logger.info("provider token adopted", metadata: ["key_id": "\(source.keyID)", "issued_at": "\(token.iat)", "reason": "\(reason)"])
        scheduleRefresh(name)
    }

    /// Signs a candidate for `name`, publishes it and counts it among those heard.
    private func offerCandidate(for name: String) async {
        guard let source = sources[name] else { return }
        do {
            let candidate = try source.signCandidate()
            heard[name, default: []].append(candidate)
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
        guard let source = sources[name], source.installed?.jwt == token.jwt else { return }
        if heard[name]?.contains(where: { ProviderTokenChoice.isFresh($0, now: source.now) }) == true { return }
        await offerCandidate(for: name)
        scheduleDecision(name)
    }

    /// The source signed a token itself: tell the fleet, naming the one it replaces when APNs
    /// refused that one, so that no worker picks it again.
    private func signedHere(_ signed: ProviderTokenSource.SignedHere) async {
        let name = Self.name(of: signed.fresh)
        if signed.replacedAfterRefusal, let old = signed.replaced { superseded[name, default: []].insert(old.iat) }
        await publish(signed.fresh, superseding: signed.replacedAfterRefusal ? signed.replaced : nil)
        scheduleRefresh(name)
    }

    private func publish(_ token: ProviderToken, superseding replaced: ProviderToken? = nil) async {
        var headers: AMQPTable = [:]
        if let replaced { headers[WireHeader.supersedes] = .int64(replaced.iat) }
        await publish(AMQPMessage(
            exchange: exchange, routingKey: "", body: Array(token.jwt.utf8),
            properties: AMQPProperties(headers: headers.isEmpty ? nil : headers, type: Self.tokenType)))
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
