import APNs
import Foundation

/// Decides what APNs would answer to one request, rule by rule, in the order APNs documents them.
struct MockRequestValidator: Sendable {
    enum Decision: Equatable {
        case accept(apnsID: String)
        case reject(APNsErrorReason, timestamp: Date? = nil)
    }

    struct Request {
        var method: String
        var path: String
        /// Lowercased names; several values when the client repeated a header.
        var headers: [String: [String]]
        var body: [UInt8]
        /// The connection presented a client certificate the server trusts.
        var certificateAuthenticated: Bool
        /// The last provider token this connection verified, and when it was issued: APNs checks
        /// a connection's token once, not on every request.
        var verifiedToken: (jwt: String, issuedAt: Date)?
    }

    let keys: [String: (teamID: String, key: ES256Key)]
    let topics: Set<String>

    /// The token in the path, when the path has the APNs shape.
    static func token(in path: String) -> String? {
        let prefix = "/3/device/"
        guard path.hasPrefix(prefix) else { return nil }
        return String(path.dropFirst(prefix.count))
    }

    /// The decision, and the token verified along the way (for the connection to remember).
    func decide(_ request: Request, now: Date = Date()) -> (Decision, verified: (jwt: String, issuedAt: Date)?) {
        var verified = request.verifiedToken
        let decision = decide(request, now: now, verified: &verified)
        return (decision, verified)
    }

    private func decide(_ request: Request, now: Date, verified: inout (jwt: String, issuedAt: Date)?) -> Decision {
        guard request.method == "POST" else { return .reject(.methodNotAllowed) }
        guard let token = Self.token(in: request.path) else { return .reject(.badPath) }
        guard !token.isEmpty else { return .reject(.missingDeviceToken) }
        do { try APNsDeviceToken.validate(token) } catch { return .reject(.badDeviceToken) }
        if request.headers.contains(where: { $0.key.hasPrefix("apns-") && $0.value.count > 1 }) {
            return .reject(.duplicateHeaders)
        }
        func header(_ name: String) -> String? { request.headers[name]?.first }

        if let refusal = authenticate(request, now: now, verified: &verified) { return .reject(refusal) }

        guard let topic = header("apns-topic"), !topic.isEmpty else { return .reject(.missingTopic) }
        if !topics.isEmpty && !topics.contains(topic) { return .reject(.topicDisallowed) }
        var pushType = APNsPushType.alert
        if let value = header("apns-push-type") {
            guard let parsed = APNsPushType(rawValue: value) else { return .reject(.invalidPushType) }
            pushType = parsed
        }
        if let suffix = pushType.requiredTopicSuffix, !topic.hasSuffix(suffix) { return .reject(.invalidPushType) }
        if let value = header("apns-priority") {
            guard let number = Int(value), let priority = APNsPriority(rawValue: number) else { return .reject(.badPriority) }
            if pushType == .background && priority == .immediate { return .reject(.badPriority) }
        }
        if let value = header("apns-expiration"), Int64(value) == nil { return .reject(.badExpirationDate) }
        if let value = header("apns-collapse-id"), value.utf8.count > APNsRequest.maximumCollapseIDBytes {
            return .reject(.badCollapseId)
        }
        var apnsID = UUID().uuidString.lowercased()
        if let value = header("apns-id") {
            guard Self.isCanonicalUUID(value) else { return .reject(.badMessageId) }
            apnsID = value.lowercased()
        }
        guard !request.body.isEmpty else { return .reject(.payloadEmpty) }
        guard request.body.count <= pushType.payloadLimit else { return .reject(.payloadTooLarge) }
        // APNs does not document a reason for malformed JSON; the mock names it BadPayload.
        guard (try? JSONSerialization.jsonObject(with: Data(request.body))) is [String: Any] else {
            return .reject(.other("BadPayload"))
        }
        return .accept(apnsID: apnsID)
    }

    /// Why the request's credentials are refused, nil when they are accepted: a trusted client
    /// certificate, or a provider token of a known key (checked once per connection, then only
    /// its age, as APNs does). Shared by pushes, broadcasts and channel management.
    func authenticate(_ request: Request, now: Date, verified: inout (jwt: String, issuedAt: Date)?) -> APNsErrorReason? {
        guard !request.certificateAuthenticated else { return nil }
        guard let authorization = request.headers["authorization"]?.first else { return .missingProviderToken }
        guard authorization.lowercased().hasPrefix("bearer ") else { return .invalidProviderToken }
        let jwt = String(authorization.dropFirst(7))
        if let known = verified, known.jwt == jwt {
            if now.timeIntervalSince(known.issuedAt) > 3600 { return .expiredProviderToken }
            return nil
        }
        switch ProviderToken.verify(jwt, keys: keys, now: now) {
        case .failure(let rejection): return rejection.reason
        case .success(let token):
            verified = (jwt, token.issuedAt)
            return nil
        }
    }

    /// Whether `topics` lets this bundle id broadcast or manage channels: the bundle id itself
    /// or its Live Activity topic.
    func acceptsBundle(_ bundleID: String) -> Bool {
        topics.isEmpty || topics.contains(bundleID) || topics.contains(bundleID + ".push-type.liveactivity")
    }

    /// 8-4-4-4-12 hex digits, as APNs requires of apns-id.
    static func isCanonicalUUID(_ text: String) -> Bool {
        let groups = text.split(separator: "-", omittingEmptySubsequences: false)
        guard groups.map(\.count) == [8, 4, 4, 4, 12] else { return false }
        return groups.allSatisfy { $0.allSatisfy(\.isHexDigit) }
    }
}
