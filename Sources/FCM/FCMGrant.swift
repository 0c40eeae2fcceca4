import Foundation
import JWTKit

/// The OAuth2 JWT-bearer grant a service account trades for an access token: an RS256 JWT whose
/// issuer is the account, audience the token endpoint, scope FCM's, valid for at most an hour.
public enum FCMGrant {
    /// The scope that lets a token send messages, and nothing else.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// How long an assertion is valid: Google's maximum.
    public static let lifetime: TimeInterval = 3600

    /// The claims Google reads.
    public struct Claims: JWTPayload, Equatable {
        public var iss: IssuerClaim
        public var scope: String
        public var aud: AudienceClaim
        public var iat: IssuedAtClaim
        public var exp: ExpirationClaim

        public func verify(using algorithm: some JWTAlgorithm) async throws {
            try exp.verifyNotExpired()
        }
    }

    /// The signed assertion, made at `now`.
    public static func assertion(_ account: FCMServiceAccount, now: Date = Date()) async throws -> String {
        let keys = JWTKeyCollection()
        let kid = account.privateKeyID.map { JWKIdentifier(string: $0) }
        await keys.add(rsa: account.privateKey, digestAlgorithm: .sha256, kid: kid)
        let claims = Claims(
            iss: IssuerClaim(value: account.clientEmail), scope: scope, aud: AudienceClaim(value: account.tokenURI),
            iat: IssuedAtClaim(value: now), exp: ExpirationClaim(value: now.addingTimeInterval(lifetime)))
        return try await keys.sign(claims, kid: kid)
    }

    /// The token request's form body.
    public static func formBody(assertion: String) -> [UInt8] {
        Array("grant_type=\(grantType.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? grantType)&assertion=\(assertion)".utf8)
    }
}
