import Crypto
import CryptoExtras
import FCM
import Foundation
import JWTKit

/// What Google would answer on FCM HTTP v1's two endpoints, rule by rule: the OAuth2 token
/// endpoint (`POST /token`: the JWT-bearer grant, its RS256 signature checked against the
/// service account's public key, and its claims) and `POST /v1/projects/<project>/messages:send`
/// (the bearer token, the project, the message and its token checked as FCM does). Devices
/// that are unregistered, and failures scripted per token, answer as FCM's `ErrorCode`s do.
struct MockFCMService: Sendable {
    enum Route: Equatable {
        case token
        case send(project: String)

        init?(path: String) {
            let prefix = "/v1/projects/", suffix = "/messages:send"
            if path == "/token" {
                self = .token
            } else if path.hasPrefix(prefix), path.hasSuffix(suffix), path.count > prefix.count + suffix.count {
                self = .send(project: String(path.dropFirst(prefix.count).dropLast(suffix.count)))
            } else {
                return nil
            }
        }
    }

    /// The device token a messages:send request's body names; nil for any other request.
    static func token(ofSend path: String, body: [UInt8]) -> String? {
        guard case .send = Route(path: path), let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else { return nil }
        return (object["message"] as? [String: Any])?["token"] as? String
    }

    struct Answer: Sendable, Equatable {
        var status: Int
        var headers: [String: String] = [:]
        var body: [UInt8]
        /// An accepted message, to record.
        var accepted: RecordedFCMMessage?
    }

    /// Each account's public key by its key id. The assertion is checked here, synchronously, not
    /// by jwt-kit's `JWTKeyCollection`: that is an actor, and awaiting it needs a thread of Swift's
    /// cooperative pool. The mock answers on its event loop, so it keeps answering when tests in
    /// its process hold every thread of that pool.
    /// A key file without `private_key_id` signs with no `kid`; its account is kept under "".
    let keys: [String: (account: MockFCMAccount, key: _RSA.Signing.PublicKey)]
    let state: MockAPNsState
    let tokenLifetime: Int

    init(accounts: [MockFCMAccount], state: MockAPNsState, tokenLifetime: Int) throws {
        self.state = state
        self.tokenLifetime = tokenLifetime
        var keys: [String: (account: MockFCMAccount, key: _RSA.Signing.PublicKey)] = [:]
        for account in accounts {
            guard keys[account.keyID] == nil else {
                throw MockFCMConfigurationError(description: "two FCM accounts have the key id '\(account.keyID)'; each needs its own")
            }
            keys[account.keyID] = (account, try _RSA.Signing.PublicKey(pemRepresentation: account.publicKeyPEM))
        }
        self.keys = keys
    }

    func answer(_ route: Route, method: String, headers: [String: [String]], body: [UInt8], connection: Int, now: Date = Date()) -> Answer {
        guard method == "POST" else { return Self.googleError(405, "METHOD_NOT_ALLOWED", "only POST") }
        switch route {
        case .token: return grant(body, now: now)
        case .send(let project): return send(project, headers: headers, body: body, connection: connection, now: now)
        }
    }

    /// The assertion's claims and account when it is an RS256 JWT signed by the key its `kid`
    /// names (none: the account whose key file has no id), issued by that key's account, and not
    /// expired; nil otherwise, as Google answers every such fault with one "Invalid JWT Signature.".
    func verifiedClaims(_ assertion: String, now: Date) -> (claims: FCMGrant.Claims, account: MockFCMAccount)? {
        guard let (header, claims, signature) = try? DefaultJWTParser().parse(Array(assertion.utf8), as: FCMGrant.Claims.self),
            header.alg == "RS256", let (account, key) = keys[header.kid ?? ""],
            let signedEnd = assertion.utf8.lastIndex(of: UInt8(ascii: "."))
        else { return nil }
        let digest = SHA256.hash(data: Array(assertion.utf8[..<signedEnd]))
        guard key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: digest, padding: .insecurePKCS1v1_5),
            claims.iss.value == account.clientEmail,
            (try? claims.exp.verifyNotExpired(currentDate: now)) != nil
        else { return nil }
        return (claims, account)
    }

    /// The token endpoint: a form with the grant type and the assertion.
    private func grant(_ body: [UInt8], now: Date) -> Answer {
        if state.fcmTokenEndpointDown() { return Self.googleError(503, "UNAVAILABLE", "The service is currently unavailable.") }
        var form: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0) }
            if parts.count == 2 { form[parts[0]] = parts[1] }
        }
        func refuse(_ error: String, _ description: String) -> Answer {
            state.fcmGrantRefused()
            return Answer(status: 400, headers: ["content-type": "application/json"], body: Self.json(["error": error, "error_description": description]))
        }
        guard form["grant_type"] == FCMGrant.grantType else { return refuse("unsupported_grant_type", "Invalid grant_type: \(form["grant_type"] ?? "")") }
        guard let assertion = form["assertion"] else { return refuse("invalid_request", "Missing required parameter: assertion") }
        guard let (claims, account) = verifiedClaims(assertion, now: now) else { return refuse("invalid_grant", "Invalid JWT Signature.") }
        guard claims.scope == FCMGrant.scope else { return refuse("invalid_scope", "Invalid OAuth scope or ID token audience provided.") }
        guard claims.aud.value.count == 1, let audience = claims.aud.value.first.flatMap(URL.init(string:)), audience.path == "/token" else {
            return refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
        }
        let span = claims.exp.value.timeIntervalSince(claims.iat.value)
        guard span > 0, span <= FCMGrant.lifetime, claims.iat.value <= now.addingTimeInterval(60) else {
            return refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        }
        let token = "mock-fcm-" + UUID().uuidString.lowercased()
        state.fcmTokenIssued(token, project: account.projectID, expiresAt: now.addingTimeInterval(TimeInterval(tokenLifetime)))
        return Answer(
            status: 200, headers: ["content-type": "application/json"],
            body: Self.json(["access_token": token, "expires_in": tokenLifetime, "token_type": "Bearer"]))
    }

    private func send(_ project: String, headers: [String: [String]], body: [UInt8], connection: Int, now: Date) -> Answer {
        guard let authorization = headers["authorization"]?.first, authorization.hasPrefix("Bearer "),
            let holder = state.fcmToken(String(authorization.dropFirst("Bearer ".count))), holder.expiresAt > now
        else {
            return Self.googleError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.")
        }
        guard holder.project == project else { return Self.googleError(403, "PERMISSION_DENIED", "Permission 'cloudmessaging.messages.create' denied on resource") }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any], let message = object["message"] as? [String: Any] else {
            return Self.badRequest("message", "Invalid JSON payload received.")
        }
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets.count == 1 else { return Self.badRequest("message", "Exactly one of token, topic or condition must be specified.") }
        guard let token = message["token"] as? String else { return Self.badRequest("message.\(targets[0])", "Only token targets are served by this mock.") }
        if FCMRegistrationToken.problem(token) != nil {
            return Self.googleError(
                400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", fcmCode: "INVALID_ARGUMENT",
                violation: ("message.token", "Invalid registration token"))
        }
        if let data = message["data"] {
            guard let data = data as? [String: Any] else { return Self.badRequest("message.data", "Invalid value at 'message.data'") }
            for (index, key) in data.keys.sorted().enumerated() {
                guard data[key] is String else {
                    return Self.badRequest("message.data[\(index)].value", "Invalid value at 'message.data[\(index)].value' (TYPE_STRING), \(data[key] ?? "")")
                }
                if key == "from" || key == "message_type" || key.hasPrefix("google.") || key.hasPrefix("gcm.") {
                    return Self.badRequest("message.data", "Invalid data payload key: \(key)")
                }
            }
        }
        if let android = message["android"] as? [String: Any] {
            if let priority = android["priority"], !["high", "normal"].contains(priority as? String ?? "") {
                return Self.badRequest("message.android.priority", "Invalid value at 'message.android.priority'")
            }
            if let ttl = android["ttl"], (ttl as? String)?.hasSuffix("s") != true {
                return Self.badRequest("message.android.ttl", "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration)")
            }
        }
        if let failure = state.firingFCMFailure(token: token) {
            var answer = Self.googleError(failure.status, Self.status(ofCode: failure.code), "mock: scripted \(failure.code)", fcmCode: failure.code)
            if let retryAfter = failure.retryAfter { answer.headers["retry-after"] = "\(retryAfter)" }
            return answer
        }
        if state.fcmUnregistered(token) {
            return Self.googleError(404, "NOT_FOUND", "Requested entity was not found.", fcmCode: "UNREGISTERED")
        }
        let name = "projects/\(project)/messages/\(state.nextFCMMessageNumber())"
        return Answer(
            status: 200, headers: ["content-type": "application/json"], body: Self.json(["name": name]),
            accepted: RecordedFCMMessage(project: project, token: token, name: name, message: body, connection: connection))
    }

    /// Google's error body: `{"error": {code, message, status, details}}`.
    static func googleError(_ code: Int, _ status: String, _ message: String, fcmCode: String? = nil, violation: (field: String, description: String)? = nil) -> Answer {
        var details: [[String: Any]] = []
        if let fcmCode { details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": fcmCode]) }
        if let violation {
            details.append([
                "@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [["field": violation.field, "description": violation.description]],
            ])
        }
        var error: [String: Any] = ["code": code, "message": message, "status": status]
        if !details.isEmpty { error["details"] = details }
        return Answer(status: code, headers: ["content-type": "application/json"], body: json(["error": error]))
    }

    static func badRequest(_ field: String, _ message: String) -> Answer {
        googleError(400, "INVALID_ARGUMENT", message, violation: (field, message))
    }

    /// The google.rpc status FCM answers a code with.
    static func status(ofCode code: String) -> String {
        switch code {
        case "UNREGISTERED": "NOT_FOUND"
        case "SENDER_ID_MISMATCH": "PERMISSION_DENIED"
        case "QUOTA_EXCEEDED": "RESOURCE_EXHAUSTED"
        case "THIRD_PARTY_AUTH_ERROR": "UNAUTHENTICATED"
        default: code
        }
    }

    static func json(_ object: [String: Any]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }
}

/// A service account the mock's token endpoint knows: what the key file names, and its public key.
public struct MockFCMAccount: Sendable {
    public var clientEmail: String
    public var projectID: String
    public var keyID: String
    public var publicKeyPEM: String

    public init(clientEmail: String, projectID: String, keyID: String, publicKeyPEM: String) {
        self.clientEmail = clientEmail
        self.projectID = projectID
        self.keyID = keyID
        self.publicKeyPEM = publicKeyPEM
    }

    /// The account of a key file.
    public init(_ account: FCMServiceAccount) {
        self.init(clientEmail: account.clientEmail, projectID: account.projectID, keyID: account.privateKeyID ?? "", publicKeyPEM: account.publicKeyPEM)
    }
}

/// A failure FCM answers for one token, `times` times (nil: always).
public struct MockFCMFailure: Sendable, Equatable {
    public var status: Int
    /// FCM's `ErrorCode` (`QUOTA_EXCEEDED`, `UNAVAILABLE`, `SENDER_ID_MISMATCH`…).
    public var code: String
    public var retryAfter: Int?
    public var times: Int?

    public init(status: Int, code: String, retryAfter: Int? = nil, times: Int? = nil) {
        self.status = status
        self.code = code
        self.retryAfter = retryAfter
        self.times = times
    }
}

/// A message FCM accepted.
public struct RecordedFCMMessage: Sendable, Equatable {
    public let project: String
    public let token: String
    /// `projects/<project>/messages/<n>`.
    public let name: String
    /// The request's body as sent.
    public let message: [UInt8]
    public let connection: Int
}

/// The mock was configured in a way it cannot answer for.
struct MockFCMConfigurationError: Error, CustomStringConvertible {
    let description: String
}
