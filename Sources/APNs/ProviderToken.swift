import Foundation

/// An APNs provider token: an ES256-signed JWT with header {alg, kid} and claims {iss, iat}.
/// It is a bearer credential: its description names the key and the time, never the JWT.
public struct ProviderToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The compact JWT, sent as `authorization: bearer <jwt>`.
    public let jwt: String
    public let keyID: String
    public let teamID: String
    public let issuedAt: Date
    /// `bearer <jwt>`, made once: every request of the next 50 minutes sends it.
    public let authorization: String

    public var description: String { "provider token of key \(keyID), team \(teamID), issued at \(Int64(issuedAt.timeIntervalSince1970))" }
    public var debugDescription: String { description }

    public init(jwt: String, keyID: String, teamID: String, issuedAt: Date) {
        self.jwt = jwt
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
        self.authorization = "bearer " + jwt
    }

    /// Signs a new token. `iat` is whole seconds, as APNs expects.
    public static func sign(keyID: String, teamID: String, issuedAt: Date, key: ES256Key) throws(APNsCredentialError) -> ProviderToken {
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let header = try json(["alg": "ES256", "kid": keyID])
        let claims = try json(["iss": teamID, "iat": iat])
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature = try key.sign(Array(signingInput.utf8))
        return ProviderToken(
            jwt: signingInput + "." + Base64URL.encode(signature), keyID: keyID, teamID: teamID,
            issuedAt: Date(timeIntervalSince1970: Double(iat)))
    }

    private static func json(_ object: [String: Any]) throws(APNsCredentialError) -> [UInt8] {
        do {
            return Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        } catch {
            throw APNsCredentialError("cannot encode the token: \(error)")
        }
    }

    /// Why a token was refused, as the APNs reason it maps to.
    public struct Rejection: Error, Sendable, Hashable {
        public let reason: APNsErrorReason
        public let detail: String
    }

    /// Checks a JWT the way APNs does: well-formed, ES256, a known key id whose key verifies the
    /// signature, the expected team, and issued within the last hour. Used by the mock server.
    public static func verify(
        _ jwt: String, keys: [String: (teamID: String, key: ES256Key)], now: Date = Date(), maximumAge: TimeInterval = 3600
    ) -> Result<ProviderToken, Rejection> {
        func reject(_ reason: APNsErrorReason, _ detail: String) -> Result<ProviderToken, Rejection> {
            .failure(Rejection(reason: reason, detail: detail))
        }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: Data(claimBytes)) as? [String: Any]
        else {
            return reject(.invalidProviderToken, "not a compact JWT")
        }
        guard header["alg"] as? String == "ES256" else { return reject(.invalidProviderToken, "alg is not ES256") }
        guard let keyID = header["kid"] as? String else { return reject(.invalidProviderToken, "no kid") }
        guard let known = keys[keyID] else { return reject(.invalidProviderToken, "unknown key id \(keyID)") }
        guard let issuer = claims["iss"] as? String else { return reject(.invalidProviderToken, "no iss") }
        guard issuer == known.teamID else { return reject(.invalidProviderToken, "iss \(issuer) is not the key's team") }
        guard let iat = (claims["iat"] as? NSNumber)?.doubleValue else { return reject(.invalidProviderToken, "no iat") }
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        guard known.key.verify(signature, of: signingInput) else { return reject(.invalidProviderToken, "signature does not verify") }
        let issuedAt = Date(timeIntervalSince1970: iat)
        guard now.timeIntervalSince(issuedAt) <= maximumAge else { return reject(.expiredProviderToken, "issued more than an hour ago") }
        return .success(ProviderToken(jwt: jwt, keyID: keyID, teamID: issuer, issuedAt: issuedAt))
    }
}
