import Foundation
import JWTKit
import Stores

/// Ties registry commands to the user they are about (`registry.auth`): a command that names a
/// user must carry `auth`, a JWT from the configured issuer, for the configured audience, not
/// expired, whose `sub` is that user; one that names a device needs it when the device belongs to
/// a user, and then for that user. So a mobile-facing gateway can forward each user's own token
/// instead of being trusted to speak for every user.
///
/// Errors never quote the token: it is a bearer credential.
public struct CommandAuthorizer: Sendable {
    private let keys: JWTKeyCollection
    public let issuer: String
    public let audience: String

    public init(material: AuthKeyMaterial, issuer: String, audience: String) async throws {
        let keys = JWTKeyCollection()
        switch material {
        case .publicKey(let pem):
            if let key = try? ES256PublicKey(pem: pem) {
                await keys.add(ecdsa: key)
            } else {
                await keys.add(rsa: try Insecure.RSA.PublicKey(pem: pem), digestAlgorithm: .sha256)
            }
        case .jwks(let json):
            try await keys.add(jwksJSON: json)
        case .hs256(let secret):
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        }
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
    }

    /// The claims a command's token must have.
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var iss: IssuerClaim?
        var aud: AudienceClaim?

        func verify(using algorithm: some JWTAlgorithm) throws {
            try exp.verifyNotExpired()
        }
    }

    /// Refuses `request` with `unauthorized` unless `auth` speaks for every user it concerns.
    public func check(_ request: RegistryRequest, auth: String?, store: any RegistryStore) async throws(StoreError) {
        if case .channel = request {
            // A channel is the app's, not a user's: no user's token can speak for it, and with
            // registry.auth on, commands may come from the apps' users through a gateway.
            throw StoreError(.unauthorized, field: "command",
                "\(request.name) is refused while registry.auth is on: a channel belongs to the app, not to a user; manage channels with pushworker channels, or from a worker without registry.auth")
        }
        if case .cancelJob = request {
            throw StoreError(.unauthorized, field: "command",
                "cancel_job is refused while registry.auth is on: a job belongs to the backend that sent it, not to a user; cancel it with pushworker schedule cancel, or from a worker without registry.auth")
        }
        if case .query(.getDeliveries) = request {
            // Whatever it names, the answer is limited to the asking user's devices: it needs a token.
            guard let auth, !auth.isEmpty else {
                throw StoreError(.unauthorized, field: "auth", "auth is missing: get_deliveries answers with the asking user's own devices, and registry.auth asks for that user's token")
            }
            _ = try await verify(auth)
        }
        let (users, devices) = Self.concerns(request)
        var owners = users
        for (app, token) in devices {
            if let user = try await store.device(app: app, token: token)?.user { owners.insert(user) }
        }
        if case .command(.endActivity(let app, let activity)) = request {
            owners.formUnion(try await Self.users(of: TokenNamespace.activity(activity).registryApp(app), in: store))
        }
        guard !owners.isEmpty else { return }
        let names = owners.sorted().map { "'\($0)'" }.joined(separator: ", ")
        guard let auth, !auth.isEmpty else {
            throw StoreError(.unauthorized, field: "auth", "auth is missing: \(request.name) concerns user \(names), and registry.auth asks for that user's token")
        }
        let subject = try await verify(auth)
        if let other = owners.sorted().first(where: { $0 != subject }) {
            throw StoreError(.unauthorized, field: "auth", "auth is the token of user '\(subject)', but \(request.name) concerns user '\(other)'")
        }
    }

    /// The users whose tokens of `registryApp` a command removing them all (`end_activity`) touches.
    static func users(of registryApp: String, in store: any RegistryStore) async throws(StoreError) -> Set<String> {
        var users: Set<String> = []
        do {
            try await store.withAllDevices(app: registryApp) { audience in
                try await audience.pages(size: 1000) { page in users.formUnion(page.compactMap(\.user)) }
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.storeUnavailable, "cannot read the tokens of \(registryApp): \(error)")
        }
        return users
    }

    /// The user whose token `auth` is, once it holds: what a query answers for under registry.auth.
    public func user(of auth: String) async throws(StoreError) -> String {
        try await verify(auth)
    }

    /// The token's subject, once its signature, expiry, issuer and audience hold.
    func verify(_ token: String) async throws(StoreError) -> String {
        let claims: Claims
        do {
            claims = try await keys.verify(token, as: Claims.self)
        } catch let error as JWTError where error.errorType == .claimVerificationFailure {
            throw StoreError(.unauthorized, field: "auth", "auth has expired")
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw StoreError(.unauthorized, field: "auth", "auth is not signed by a key registry.auth names")
        } catch {
            throw StoreError(.unauthorized, field: "auth", "auth is not a JWT this worker can verify (it needs sub and exp, signed by a key registry.auth names)")
        }
        guard claims.iss?.value == issuer else {
            throw StoreError(.unauthorized, field: "auth", "auth was issued by '\(claims.iss?.value ?? "nobody")', not '\(issuer)'")
        }
        guard claims.aud?.value.contains(audience) == true else {
            throw StoreError(.unauthorized, field: "auth", "auth is not meant for audience '\(audience)'")
        }
        return claims.sub.value
    }

    /// The users a request names, and the devices whose user it touches.
    static func concerns(_ request: RegistryRequest) -> (users: Set<String>, devices: [(app: String, token: String)]) {
        func scope(_ scope: PreferenceScope) -> (Set<String>, [(app: String, token: String)]) {
            switch scope {
            case .user(let user), .userApp(let user, _): ([user], [])
            case .device(let app, let token): ([], [(app, token)])
            }
        }
        switch request {
        case .command(let command):
            switch command {
            case .registerDevice(let app, let token, let user, _): return (user.map { [$0] } ?? [], [(app, token)])
            case .unregisterDevice(let app, let token): return ([], [(app, token)])
            case .connect(let app, let token, let user), .disconnect(let app, let token, let user): return ([user], [(app, token)])
            case .addToGroup(let user, _, _), .removeFromGroup(let user, _), .deleteUser(let user): return ([user], [])
            case .setPreferences(let target, _), .editPreferences(let target, _): return scope(target)
            case .replaceToken(let app, let old, let new): return ([], [(app, old), (app, new)])
            case .resetBadge(.device(let app, let token)): return ([], [(app, token)])
            case .resetBadge(.user(let user, _)): return ([user], [])
            case .registerLiveActivityToken(let app, let namespace, let token, let user):
                return (user.map { [$0] } ?? [], [(namespace.registryApp(app), token)])
            case .unregisterLiveActivityToken(let app, let namespace, let token): return ([], [(namespace.registryApp(app), token)])
            // Its tokens' users are read from the store: see `check`.
            case .endActivity: return ([], [])
            case .setTimeZone(let target, _), .setQuietHours(let target, _): return scope(target)
            }
        case .channel, .cancelJob:
            // Refused by `check` before it asks.
            return ([], [])
        case .query(let query):
            switch query {
            case .status(let app, let token, _, _): return ([], [(app, token)])
            case .getPreferences(let target): return scope(target)
            case .getDeliveries(let query):
                switch query.subject {
                case .user(let user): return ([user], [])
                case .token(let token): return ([], query.app.map { [($0, token)] } ?? [])
                // Answered with the asking user's own devices only (`check` asks for a token).
                case .job, .idempotencyKey: return ([], [])
                }
            }
        }
    }
}
