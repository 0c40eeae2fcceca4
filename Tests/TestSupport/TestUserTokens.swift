import Foundation
import JWTKit

/// Users' tokens as an identity provider would sign them, for the tests of `registry.auth`: an
/// ES256 key pair (its public half is what a worker is configured with) and an HS256 secret.
public struct TestUserTokens: Sendable {
    public static let issuer = "https://id.example.com"
    public static let audience = "pushworker"
    public static let hs256Secret = "test-secret-of-at-least-32-bytes-0123456789"

    public let publicKeyPEM: String
    private let es256: JWTKeyCollection
    private let hs256: JWTKeyCollection

    public init() async {
        let key = ES256PrivateKey()
        publicKeyPEM = key.publicKey.pemRepresentation
        es256 = JWTKeyCollection()
        await es256.add(ecdsa: key)
        hs256 = JWTKeyCollection()
        await hs256.add(hmac: HMACKey(from: Self.hs256Secret), digestAlgorithm: .sha256)
    }

    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var iss: IssuerClaim
        var aud: AudienceClaim
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    /// A token for `user`, valid for `seconds` (negative: expired), signed with the ES256 key or
    /// the HS256 secret.
    public func token(
        for user: String, seconds: Double = 600, issuer: String = issuer, audience: String = audience, hs256: Bool = false
    ) async throws -> String {
        let claims = Claims(
            sub: SubjectClaim(value: user), exp: ExpirationClaim(value: Date().addingTimeInterval(seconds)),
            iss: IssuerClaim(value: issuer), aud: AudienceClaim(value: [audience]))
        return try await (hs256 ? self.hs256 : es256).sign(claims)
    }
}
