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
    /// Tokens signed: one every 50 minutes per key is healthy; more means APNs keeps calling them
    /// expired (a clock or key problem).
    private let signings: CoreMetrics.Counter

    public static let reuseInterval: TimeInterval = 50 * 60
    public static let minimumRegenerationInterval: TimeInterval = 20 * 60

    /// `clock` is injectable so the 20- and 50-minute rules can be tested without waiting.
    public init(keyID: String, teamID: String, key: ES256Key, clock: @escaping @Sendable () -> Date = { Date() }) {
        precondition(key.isPrivate, "a provider token source needs the private key")
        self.keyID = keyID
        self.teamID = teamID
        self.key = key
        self.clock = clock
        signings = CoreMetrics.Counter(label: "pushworker_provider_token_refreshes_total", dimensions: [("key_id", keyID)])
    }

    /// The current token, signing a new one when there is none or it is 50 minutes old.
    public func current() throws(APNsCredentialError) -> ProviderToken {
        let now = clock()
        let result: Result<ProviderToken, APNsCredentialError> = state.withLock { token in
            if let existing = token, now.timeIntervalSince(existing.issuedAt) < Self.reuseInterval {
                return .success(existing)
            }
            return sign(into: &token, at: now)
        }
        return try result.get()
    }

    /// Called when APNs answered ExpiredProviderToken for `rejected`. Signs a new token unless
    /// another task already did, or unless the current one is under 20 minutes old (a younger
    /// replacement would only earn TooManyProviderTokenUpdates). Returns the token to retry with.
    public func replace(_ rejected: ProviderToken) throws(APNsCredentialError) -> ProviderToken {
        let now = clock()
        let result: Result<ProviderToken, APNsCredentialError> = state.withLock { token in
            if let existing = token, existing.jwt != rejected.jwt {
                return .success(existing)
            }
            if let existing = token, now.timeIntervalSince(existing.issuedAt) < Self.minimumRegenerationInterval {
                return .success(existing)
            }
            return sign(into: &token, at: now)
        }
        return try result.get()
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
}
