import Foundation

/// An access token from the token endpoint, and when to ask for the next one.
public struct FCMAccessToken: Sendable, Equatable {
    public let value: String
    /// When Google stops taking it.
    public let expiresAt: Date

    public init(value: String, expiresAt: Date) {
        self.value = value
        self.expiresAt = expiresAt
    }

    /// Reads the endpoint's answer (`{"access_token", "expires_in", "token_type": "Bearer"}`),
    /// received at `now`.
    public init(response body: some DataProtocol, now: Date = Date()) throws(FCMConfigurationError) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw FCMConfigurationError("the token endpoint answered with something other than a JSON object")
        }
        guard let token = object["access_token"] as? String, !token.isEmpty else {
            let reason = [object["error"] as? String, object["error_description"] as? String].compactMap { $0 }.joined(separator: ": ")
            throw FCMConfigurationError("the token endpoint gave no access_token\(reason.isEmpty ? "" : " (\(reason))")")
        }
        if let type = object["token_type"] as? String, type.lowercased() != "bearer" {
            throw FCMConfigurationError("the token endpoint gave a token of type \(type), not Bearer")
        }
        guard let lifetime = (object["expires_in"] as? NSNumber)?.doubleValue, lifetime > 0 else {
            throw FCMConfigurationError("the token endpoint gave no positive expires_in")
        }
        value = token
        expiresAt = now.addingTimeInterval(lifetime)
    }

    /// Whether to ask for a new one at `now`: once less than `margin` of its life is left, so a
    /// message is never sent with a token that lapses on the way, and the fleet's workers (which
    /// share a token) renew it before any of them needs it.
    public func needsRenewal(at now: Date, margin: TimeInterval = 300) -> Bool {
        expiresAt.timeIntervalSince(now) < margin
    }
}
