import APNs
import Foundation
@testable import PushWorker
import TestSupport
import Testing

/// The rule every worker applies to the tokens it hears: whatever order they come in, every
/// worker that heard the same tokens picks the same one, and a stale token is never picked.
@Suite("The fleet's choice of a provider token")
struct ProviderTokenChoiceTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    static func token(_ jwt: String, age: TimeInterval) -> ProviderToken {
        ProviderToken(jwt: jwt, keyID: "K", teamID: "T", issuedAt: now.addingTimeInterval(-age))
    }

    @Test("the oldest fresh token wins, then the smallest JWT, in any order heard")
    func oldestFreshWins() {
        let established = Self.token("c", age: 20 * 60)
        let newcomer = Self.token("a", age: 1)
        let twin = Self.token("b", age: 1)
        for heard in [[newcomer, twin], [twin, newcomer]] {
            #expect(ProviderTokenChoice.pick(current: established, heard: heard, now: Self.now) == established)
            #expect(ProviderTokenChoice.pick(current: twin, heard: heard + [newcomer], now: Self.now) == newcomer)
            #expect(ProviderTokenChoice.pick(current: nil, heard: heard, now: Self.now) == newcomer)
        }
    }

    @Test("a token 45 minutes old is due: any fresh candidate replaces it, and alone it is not picked; one from the future is refused")
    func staleAndFuture() {
        let due = Self.token("a", age: 45 * 60)
        let candidate = Self.token("z", age: 2)
        #expect(ProviderTokenChoice.pick(current: due, heard: [candidate], now: Self.now) == candidate)
        #expect(ProviderTokenChoice.pick(current: due, heard: [], now: Self.now) == nil)
        let future = Self.token("b", age: -5 * 60)
        #expect(ProviderTokenChoice.pick(current: nil, heard: [future], now: Self.now) == nil)
        #expect(ProviderTokenChoice.pick(current: nil, heard: [Self.token("b", age: -30)], now: Self.now) != nil, "30 s of clock skew is tolerated")
    }
}
