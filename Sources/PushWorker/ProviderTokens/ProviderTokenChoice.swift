import APNs
import Foundation

/// The rule every worker applies to the provider tokens it has heard for one key, so that all of
/// them pick the same token without a leader: among the tokens still fresh, the oldest, then the
/// smallest JWT. A newcomer therefore takes the token the fleet already uses, and candidates
/// signed at the same moment (a refresh, a fleet starting at once) resolve to one of them.
enum ProviderTokenChoice {
    /// A token is refreshed (a candidate signed and published) at this age: before the 50 minutes
    /// after which each worker's `ProviderTokenSource` would sign its own, and well before APNs
    /// refuses it at 60.
    static let refreshAge: TimeInterval = 45 * 60
    /// Tokens signed this far ahead of this worker's clock are refused: another host's clock is off.
    static let clockSkew: TimeInterval = 60

    /// Young enough to be agreed on (and issued no later than a minute from now).
    static func isFresh(_ token: ProviderToken, now: Date) -> Bool {
        let age = now.timeIntervalSince(token.issuedAt)
        return age < refreshAge && age > -clockSkew
    }

    /// The token to use of `current` and `heard`: the best fresh one, or nil when none is fresh.
    static func pick(current: ProviderToken?, heard: [ProviderToken], now: Date) -> ProviderToken? {
        var best: ProviderToken?
        for token in ([current].compactMap { $0 } + heard) where isFresh(token, now: now) {
            if let chosen = best, !precedes(token, chosen) { continue }
            best = token
        }
        return best
    }

    static func precedes(_ a: ProviderToken, _ b: ProviderToken) -> Bool {
        a.issuedAt != b.issuedAt ? a.issuedAt < b.issuedAt : a.jwt < b.jwt
    }
}
