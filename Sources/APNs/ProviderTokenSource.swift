import CoreMetrics
import Foundation
import Synchronization

/// Hands out the provider token for one signing key, following Apple's rules: reuse a token for
/// 50 minutes (APNs refuses them after 60), never sign more than once in 20 minutes (APNs answers
/// TooManyProviderTokenUpdates), and replace a token at once when APNs calls it expired.
public final class ProviderTokenSource: Sendable {
    public let keyID: String
    public let teamID: String
    private let key: ES256Key
    private let clock: @Sendable () -> Date
    private let state = Mutex<ProviderToken?>(nil)
    /// Told of each token this source signs itself (none agreed in time, or APNs called the
    /// current one expired), after the fact and outside the lock: the fleet's agreement publishes it.
    private let signedHere = Mutex<(@Sendable (SignedHere) -> Void)?>(nil)

    /// A token this source signed itself, and why.
    public struct SignedHere: Sendable {
        public var fresh: ProviderToken
        /// The token it replaces, if any.
        public var replaced: ProviderToken?
        /// APNs called `replaced` expired (rather than: there was none, or it was 50 minutes old).
        public var replacedAfterRefusal: Bool
    }
    /// Tokens signed: one every 50 minutes per key is healthy; more means APNs keeps calling them
    /// expired (a clock or key problem).
    /// Made where it counts, not in `init`: a source is made when the configuration is checked,
    /// before the process has chosen its metrics backend, and a counter binds to the backend in
    /// force when it is made. A token is signed every 45 minutes at most.
    private var signings: CoreMetrics.Counter {
        CoreMetrics.Counter(label: "pushworker_provider_token_refreshes_total", dimensions: [("key_id", keyID)])
    }

    public static let reuseInterval: TimeInterval = 50 * 60
    public static let minimumRegenerationInterval: TimeInterval = 20 * 60

    /// `clock` is injectable so the 20- and 50-minute rules can be tested without waiting.
    public init(keyID: String, teamID: String, key: ES256Key, clock: @escaping @Sendable () -> Date = { Date() }) {
        precondition(key.isPrivate, "a provider token source needs the private key")
        self.keyID = keyID
        self.teamID = teamID
        self.key = key
        self.clock = clock
    }

    /// The current token, signing a new one when there is none or it is 50 minutes old.
    public func current() throws(APNsCredentialError) -> ProviderToken {
        let now = clock()
        let (result, replaced): (Result<ProviderToken, APNsCredentialError>, ProviderToken??) = state.withLock { token in
            if let existing = token, now.timeIntervalSince(existing.issuedAt) < Self.reuseInterval {
                return (.success(existing), nil)
            }
            let before = token
            return (sign(into: &token, at: now), .some(before))
        }
        let fresh = try result.get()
        if case .some(let before) = replaced { tell(SignedHere(fresh: fresh, replaced: before, replacedAfterRefusal: false)) }
        return fresh
    }

    /// Called when APNs answered ExpiredProviderToken for `rejected`. Signs a new token unless
    /// another task already did, or unless the current one is under 20 minutes old (a younger
    /// replacement would only earn TooManyProviderTokenUpdates). Returns the token to retry with.
    public func replace(_ rejected: ProviderToken) throws(APNsCredentialError) -> ProviderToken {
        let now = clock()
        let (result, signed): (Result<ProviderToken, APNsCredentialError>, Bool) = state.withLock { token in
            if let existing = token, existing.jwt != rejected.jwt {
                return (.success(existing), false)
            }
            if let existing = token, now.timeIntervalSince(existing.issuedAt) < Self.minimumRegenerationInterval {
                return (.success(existing), false)
            }
            return (sign(into: &token, at: now), true)
        }
        let fresh = try result.get()
        if signed { tell(SignedHere(fresh: fresh, replaced: rejected, replacedAfterRefusal: true)) }
        return fresh
    }

    private func tell(_ signed: SignedHere) {
        if let hook = signedHere.withLock({ $0 }) { hook(signed) }
    }

    private func sign(into token: inout ProviderToken?, at now: Date) -> Result<ProviderToken, APNsCredentialError> {
        do {
            let fresh = try ProviderToken.sign(keyID: keyID, teamID: teamID, issuedAt: now, key: key)
            token = fresh
            signings.increment()
            return .success(fresh)
        } catch {
            return .failure(error)
        }
    }

    // MARK: One token for a fleet of workers

    /// The token requests use now, if any; never signs.
    public var installed: ProviderToken? { state.withLock { $0 } }

    /// Signs a token without using it yet: a candidate the fleet may agree on.
    public func signCandidate() throws(APNsCredentialError) -> ProviderToken {
        let fresh = try ProviderToken.sign(keyID: keyID, teamID: teamID, issuedAt: clock(), key: key)
        signings.increment()
        return fresh
    }

    /// Makes `token` (signed by this key, see `verified(_:)`) the one requests use from now on,
    /// if the one in use is still `expected`: a token signed here meanwhile (APNs refused the old
    /// one) is not overwritten. Returns whether it was adopted.
    @discardableResult
    public func adopt(_ token: ProviderToken, replacing expected: ProviderToken?) -> Bool {
        precondition(token.keyID == keyID && token.teamID == teamID, "a token of another key")
        return state.withLock { current in
            guard current?.jwt == expected?.jwt else { return false }
            current = token
            return true
        }
    }

    /// Installs the closure told of every token this source signs itself (see `SignedHere`).
    public func onSignedHere(_ hook: @escaping @Sendable (SignedHere) -> Void) {
        signedHere.withLock { $0 = hook }
    }

    /// The token a JWT is, when it is an ES256 token of this key and team signed by this key (as
    /// another worker publishes it); nil for anything else, so no one else's message can put a
    /// token into use.
    public func verified(_ jwt: String) -> ProviderToken? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]),
            let headerFields = try? JSONSerialization.jsonObject(with: Data(header)) as? [String: Any],
            let claimFields = try? JSONSerialization.jsonObject(with: Data(claims)) as? [String: Any],
            headerFields["alg"] as? String == "ES256", headerFields["kid"] as? String == keyID,
            claimFields["iss"] as? String == teamID, let iat = (claimFields["iat"] as? NSNumber)?.int64Value
        else { return nil }
        guard key.verify(signature, of: Array((parts[0] + "." + parts[1]).utf8)) else { return nil }
        return ProviderToken(jwt: jwt, keyID: keyID, teamID: teamID, issuedAt: Date(timeIntervalSince1970: Double(iat)))
    }

    /// Now, by the clock this source signs with.
    public var now: Date { clock() }
}
