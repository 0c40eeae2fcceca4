import APNs
import Foundation
@testable import PushWorker
import Testing

/// The fleet's agreement on provider tokens, event by event, without a broker: what the state
/// decides and asks the agreement to do.
@Suite("Provider token agreement, its decisions alone")
struct ProviderTokenAgreementStateTests {
    typealias State = ProviderTokenAgreementState
    static let now = Date(timeIntervalSince1970: 1_795_000_000)
    static let key = "TEAM123456.KEY1234567"

    static func token(_ jwt: String, age: TimeInterval) -> ProviderToken {
        ProviderToken(jwt: jwt, keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: now.addingTimeInterval(-age))
    }

    static func source(_ installed: ProviderToken?) -> State.Key { State.Key(installed: installed, now: now) }

    @Test("a starting worker's question is answered with the fresh tokens known here, the one in use and those still being decided on; stale ones stay quiet")
    func queried() {
        var state = State(settle: .seconds(1))
        let installed = Self.token("a", age: 600), rival = Self.token("b", age: 10), stale = Self.token("c", age: 46 * 60)
        _ = state.heard(rival, key: Self.key, Self.source(installed), supersedes: nil)
        _ = state.heard(stale, key: Self.key, Self.source(installed), supersedes: nil)
        #expect(state.queried([Self.key: Self.source(installed)]) == [.publish(installed, superseding: nil), .publish(rival, superseding: nil)])
    }

    @Test("candidates heard are decided on once, after the settling time: the oldest fresh one wins, over the token in use when older")
    func decides() {
        var state = State(settle: .seconds(1))
        let mine = Self.token("m", age: 5), older = Self.token("o", age: 20), newer = Self.token("n", age: 1)
        #expect(state.heard(older, key: Self.key, Self.source(mine), supersedes: nil) == [.decideLater(key: Self.key)])
        #expect(state.heard(newer, key: Self.key, Self.source(mine), supersedes: nil) == [], "one decision waits already")
        let (decided, actions) = state.decide(key: Self.key, Self.source(mine), refreshing: true, at: .now)
        #expect(decided && actions == [.adopt(key: Self.key, older, replacing: mine, reason: "the fleet's pick")])
        // The same token heard again is nothing new.
        #expect(state.heard(older, key: Self.key, Self.source(older), supersedes: nil) == [])
    }

    @Test("the token in use wins over a younger rival: it is announced again so the rival's worker takes it, at most once per settling time")
    func announces() {
        var state = State(settle: .seconds(1))
        let mine = Self.token("m", age: 30), rival = Self.token("r", age: 2)
        let start = ContinuousClock.now
        _ = state.heard(rival, key: Self.key, Self.source(mine), supersedes: nil)
        #expect(state.decide(key: Self.key, Self.source(mine), refreshing: false, at: start).actions
            == [.scheduleRefresh(key: Self.key), .announce(mine)])
        _ = state.heard(Self.token("r2", age: 1), key: Self.key, Self.source(mine), supersedes: nil)
        #expect(state.decide(key: Self.key, Self.source(mine), refreshing: true, at: start + .milliseconds(500)).actions == [], "within the settling time")
        _ = state.heard(Self.token("r3", age: 1), key: Self.key, Self.source(mine), supersedes: nil)
        #expect(state.decide(key: Self.key, Self.source(mine), refreshing: true, at: start + .seconds(2)).actions == [.announce(mine)])
    }

    @Test("nothing fresh known: no decision, so the worker offers a candidate of its own")
    func nothingFresh() {
        var state = State(settle: .seconds(1))
        _ = state.heard(Self.token("old", age: 50 * 60), key: Self.key, Self.source(nil), supersedes: nil)
        let (decided, actions) = state.decide(key: Self.key, Self.source(nil), refreshing: false, at: .now)
        #expect(!decided && actions.isEmpty)
        let candidate = Self.token("c", age: 0)
        state.offered(candidate, key: Self.key)
        #expect(state.decide(key: Self.key, Self.source(nil), refreshing: false, at: .now).actions
            == [.adopt(key: Self.key, candidate, replacing: nil, reason: "the fleet's token")])
    }

    @Test("a token replacing the one APNs called expired is adopted at once, and the expired one is never picked again")
    func superseded() {
        var state = State(settle: .seconds(1))
        let expired = Self.token("x", age: 120), replacement = Self.token("y", age: 0)
        #expect(state.heard(replacement, key: Self.key, Self.source(expired), supersedes: expired.iat)
            == [.adopt(key: Self.key, replacement, replacing: expired, reason: "it replaces the token APNs called expired")])
        // Another worker, still on the expired token, decides: the expired one is out, even in use.
        var other = State(settle: .seconds(1))
        let rival = Self.token("z", age: 1)
        _ = other.heard(rival, key: Self.key, Self.source(expired), supersedes: nil)
        _ = other.signedHere(key: Self.key, fresh: rival, replaced: expired, afterRefusal: true)
        #expect(other.decide(key: Self.key, Self.source(expired), refreshing: false, at: .now).actions
            == [.adopt(key: Self.key, rival, replacing: expired, reason: "the fleet's pick")])
    }

    @Test("a token signed here is published, naming the one it replaces only when APNs refused that one; its refresh is armed")
    func signedHere() {
        var state = State(settle: .seconds(1))
        let old = Self.token("o", age: 3000), fresh = Self.token("f", age: 0)
        #expect(state.signedHere(key: Self.key, fresh: fresh, replaced: old, afterRefusal: true)
            == [.publish(fresh, superseding: old), .scheduleRefresh(key: Self.key)])
        #expect(state.signedHere(key: Self.key, fresh: fresh, replaced: old, afterRefusal: false)
            == [.publish(fresh, superseding: nil), .scheduleRefresh(key: Self.key)])
    }

    @Test("a refresh due offers a candidate and decides later, unless the token was replaced or another worker's fresh candidate came first")
    func refresh() {
        var state = State(settle: .seconds(1))
        let installed = Self.token("i", age: 45 * 60)
        #expect(state.refreshDue(key: Self.key, from: installed, Self.source(installed)) == [.offerCandidate(key: Self.key), .decideLater(key: Self.key)])
        #expect(state.refreshDue(key: Self.key, from: installed, Self.source(Self.token("j", age: 1))) == [], "replaced meanwhile")
        var heard = State(settle: .seconds(1))
        _ = heard.heard(Self.token("k", age: 1), key: Self.key, Self.source(installed), supersedes: nil)
        #expect(heard.refreshDue(key: Self.key, from: installed, Self.source(installed)) == [])
    }
}
