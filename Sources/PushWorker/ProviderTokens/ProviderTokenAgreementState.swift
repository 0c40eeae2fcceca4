import APNs
import Foundation

/// What the fleet's agreement on provider tokens knows, and what it decides at each event (a
/// token or a question heard from the fleet, a settling time over, a refresh due, a token signed
/// here), apart from the broker and the timers: each event returns the actions the agreement
/// (`ProviderTokenAgreement`) then carries out. Tested alone, without a broker.
struct ProviderTokenAgreementState {
    /// A key's source as an event finds it.
    struct Key: Sendable {
        var installed: ProviderToken?
        /// The source's clock (tokens' ages).
        var now: Date
    }

    enum Action: Equatable, Sendable {
        /// Publish the token to the fleet, naming the one it supersedes (APNs called it expired).
        case publish(ProviderToken, superseding: ProviderToken?)
        /// Install the token in the key's source in place of `replacing` (then refresh it in time).
        case adopt(key: String, ProviderToken, replacing: ProviderToken?, reason: String)
        /// Decide for the key once the settling time has passed.
        case decideLater(key: String)
        /// Arm the key's refresh from the token it has installed.
        case scheduleRefresh(key: String)
        /// Sign a candidate for the key, publish it, and count it as heard (`offered`).
        case offerCandidate(key: String)
        /// Publish the token in use again, apart from the decision (nothing waits for it).
        case announce(ProviderToken)
    }

    /// Candidates heard since the last decision, per key.
    private var heard: [String: [ProviderToken]] = [:]
    /// `iat`s of tokens APNs called expired somewhere in the fleet, per key: never picked again.
    private var superseded: [String: Set<Int64>] = [:]
    /// When this worker last announced its token again for a key whose rival lost to it.
    private var announced: [String: ContinuousClock.Instant] = [:]
    /// Keys with a decision waiting for the settling time.
    private var deciding: Set<String> = []
    /// How long to listen before deciding, and between two announcements of one key.
    let settle: Duration

    init(settle: Duration) {
        self.settle = settle
    }

    /// A worker starting asked: tell it the tokens in use here, and the candidates still being
    /// decided on (it may have missed them, and would otherwise offer a rival too late).
    func queried(_ keys: [String: Key]) -> [Action] {
        keys.sorted { $0.key < $1.key }.flatMap { name, key in
            Set([key.installed].compactMap { $0 } + (heard[name] ?? []))
                .filter { ProviderTokenChoice.isFresh($0, now: key.now) }
                .sorted { $0.jwt < $1.jwt }
                .map { Action.publish($0, superseding: nil) }
        }
    }

    /// A token of this key heard from the fleet; `supersedes`, the `iat` of the token it replaces
    /// after APNs called that one expired.
    mutating func heard(_ token: ProviderToken, key name: String, _ key: Key, supersedes old: Int64?) -> [Action] {
        guard token.jwt != key.installed?.jwt else { return [] }
        if let old {
            superseded[name, default: []].insert(old)
            if let installed = key.installed, installed.iat == old, ProviderTokenChoice.isFresh(token, now: key.now) {
                // APNs called the token in use expired where the other worker sent: take its
                // replacement now, before this worker's requests are refused too.
                return [.adopt(key: name, token, replacing: installed, reason: "it replaces the token APNs called expired")]
            }
        }
        heard[name, default: []].append(token)
        return decideLater(name)
    }

    /// Picks among what was heard for the key and the token in use; `decided` is false when
    /// nothing fresh is known. `refreshing`: the key's refresh is armed already.
    mutating func decide(key name: String, _ key: Key, refreshing: Bool, at instant: ContinuousClock.Instant) -> (decided: Bool, actions: [Action]) {
        deciding.remove(name)
        let void = superseded[name] ?? []
        let candidates = (heard.removeValue(forKey: name) ?? []).filter { !void.contains($0.iat) }
        let current = key.installed.flatMap { void.contains($0.iat) ? nil : $0 }
        guard let chosen = ProviderTokenChoice.pick(current: current, heard: candidates, now: key.now) else { return (false, []) }
        if chosen.jwt != key.installed?.jwt {
            return (true, [.adopt(key: name, chosen, replacing: key.installed, reason: key.installed == nil ? "the fleet's token" : "the fleet's pick")])
        }
        var actions: [Action] = refreshing ? [] : [.scheduleRefresh(key: name)]
        // A worker that offered a rival (it missed this token: a reconnect, a clock a little
        // behind) hears the one that wins over its own, at most once per settling time.
        if candidates.contains(where: { $0.jwt != chosen.jwt }), ProviderTokenChoice.isFresh(chosen, now: key.now),
            announced[name].map({ instant - $0 >= settle }) ?? true
        {
            announced[name] = instant
            actions.append(.announce(chosen))
        }
        return (true, actions)
    }

    /// A candidate signed here, counted among those heard.
    mutating func offered(_ candidate: ProviderToken, key name: String) {
        heard[name, default: []].append(candidate)
    }

    /// The key's refresh is due for `token`: a candidate is offered, unless the token was
    /// replaced meanwhile or another worker's fresh candidate came first.
    mutating func refreshDue(key name: String, from token: ProviderToken, _ key: Key) -> [Action] {
        guard key.installed?.jwt == token.jwt else { return [] }
        if heard[name]?.contains(where: { ProviderTokenChoice.isFresh($0, now: key.now) }) == true { return [] }
        return [.offerCandidate(key: name)] + decideLater(name)
    }

    /// The source signed a token itself: the fleet is told, with the one it replaces when APNs
    /// refused that one, so that no worker picks it again.
    mutating func signedHere(key name: String, fresh: ProviderToken, replaced: ProviderToken?, afterRefusal: Bool) -> [Action] {
        if afterRefusal, let replaced { superseded[name, default: []].insert(replaced.iat) }
        return [.publish(fresh, superseding: afterRefusal ? replaced : nil), .scheduleRefresh(key: name)]
    }

    private mutating func decideLater(_ name: String) -> [Action] {
        deciding.insert(name).inserted ? [.decideLater(key: name)] : []
    }
}
