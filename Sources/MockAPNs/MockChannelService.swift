import APNs
import Foundation

/// What APNs would answer to a Live Activity broadcast (`POST /4/broadcasts/apps/<bundle id>`)
/// or a channel management call (`/1/apps/<bundle id>/channels`, `/all-channels`), rule by rule;
/// creating and deleting channels in the shared state. Pushes to devices are
/// ``MockRequestValidator``'s, whose credential check this shares.
struct MockChannelService: Sendable {
    /// Which API a path belongs to.
    enum Route: Equatable {
        case device
        case broadcast(bundleID: String)
        /// `/1/apps/<bundle id>/channels` (`all` false) or `/all-channels` (`all` true).
        case management(bundleID: String, all: Bool)
        /// Under `/1/apps/` but no endpoint.
        case unknownManagement

        init(path: String) {
            let broadcast = "/4/broadcasts/apps/"
            let management = "/1/apps/"
            if path.hasPrefix(broadcast) {
                self = .broadcast(bundleID: String(path.dropFirst(broadcast.count)))
            } else if path.hasPrefix(management) {
                let parts = path.dropFirst(management.count).split(separator: "/", omittingEmptySubsequences: false)
                if parts.count == 2, !parts[0].isEmpty, parts[1] == "channels" || parts[1] == "all-channels" {
                    self = .management(bundleID: String(parts[0]), all: parts[1] == "all-channels")
                } else {
                    self = .unknownManagement
                }
            } else {
                self = .device
            }
        }
    }

    enum Answer: Equatable {
        /// An accepted broadcast, to record; answered 200 with this `apns-request-id`.
        case broadcast(requestID: String)
        /// A management call done: status, headers beyond `apns-request-id`, JSON body.
        case management(status: Int, headers: [String: String], body: [UInt8])
        case reject(APNsErrorReason)
    }

    let validator: MockRequestValidator
    let state: MockAPNsState
    let maxChannels: Int

    /// `injected` is asked once the request is found valid and before anything changes: a fault's
    /// reason replaces the answer, and a create or delete then does nothing.
    func decide(
        _ route: Route, _ request: MockRequestValidator.Request, now: Date = Date(), verified: inout (jwt: String, issuedAt: Date)?,
        injected: () -> APNsErrorReason?
    ) -> Answer {
        func header(_ name: String) -> String? { request.headers[name]?.first }
        switch route {
        case .device, .unknownManagement:
            return .reject(.badPath)
        case .broadcast(let bundleID):
            guard request.method == "POST" else { return .reject(.methodNotAllowed) }
            guard !bundleID.isEmpty, !bundleID.contains("/") else { return .reject(.badPath) }
            if request.headers.contains(where: { $0.key.hasPrefix("apns-") && $0.value.count > 1 }) { return .reject(.duplicateHeaders) }
            if let refusal = validator.authenticate(request, now: now, verified: &verified) { return .reject(refusal) }
            guard validator.acceptsBundle(bundleID) else { return .reject(.topicDisallowed) }
            let policy: APNsChannelStoragePolicy
            switch channel(header("apns-channel-id"), bundleID: bundleID) {
            case .failure(let reason): return .reject(reason)
            case .success(let found): policy = found
            }
            guard let pushType = header("apns-push-type") else { return .reject(.missingPushType) }
            guard pushType == APNsPushType.liveactivity.rawValue else { return .reject(.invalidPushType) }
            if let value = header("apns-priority"), value != "10" && value != "5" { return .reject(.badPriority) }
            if let value = header("apns-expiration") {
                guard let expiration = Int64(value) else { return .reject(.badExpirationDate) }
                // A channel that stores nothing cannot be asked to keep trying.
                if expiration != 0 && policy == .noMessageStored { return .reject(.badExpirationDate) }
            }
            guard !request.body.isEmpty else { return .reject(.payloadEmpty) }
            guard request.body.count <= APNsRequest.broadcastPayloadLimit else { return .reject(.payloadTooLarge) }
            guard (try? JSONSerialization.jsonObject(with: Data(request.body))) is [String: Any] else { return .reject(.other("BadPayload")) }
            if let reason = injected() { return .reject(reason) }
            return .broadcast(requestID: header("apns-request-id") ?? UUID().uuidString.lowercased())
        case .management(let bundleID, let all):
            let allowed = all ? ["GET"] : ["GET", "POST", "DELETE"]
            guard allowed.contains(request.method) else { return .reject(.methodNotAllowed) }
            if request.headers.contains(where: { $0.key.hasPrefix("apns-") && $0.value.count > 1 }) { return .reject(.duplicateHeaders) }
            if let refusal = validator.authenticate(request, now: now, verified: &verified) { return .reject(refusal) }
            guard validator.acceptsBundle(bundleID) else { return .reject(.topicDisallowed) }
            if all {
                if let reason = injected() { return .reject(reason) }
                let ids = (state.channels[bundleID] ?? [:]).keys.sorted()
                return .management(status: 200, headers: [:], body: Self.json(["channels": ids]))
            }
            switch request.method {
            case "POST":
                guard let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] else {
                    return .reject(.other("BadRequest"))
                }
                guard let pushType = object["push-type"] as? String else { return .reject(.missingPushType) }
                guard pushType.lowercased() == "liveactivity" else { return .reject(.invalidPushType) }
                // APNs documents no reason for a bad storage policy; the mock names it BadRequest.
                guard let number = object["message-storage-policy"] as? NSNumber, let policy = APNsChannelStoragePolicy(rawValue: number.intValue),
                    Double(policy.rawValue) == number.doubleValue
                else { return .reject(.other("BadRequest")) }
                if let reason = injected() { return .reject(reason) }
                guard let id = state.createChannel(bundleID: bundleID, policy: policy, limit: maxChannels) else {
                    return .reject(.cannotCreateChannelConfig)
                }
                return .management(status: 201, headers: ["apns-channel-id": id], body: [])
            case "GET":
                switch channel(header("apns-channel-id"), bundleID: bundleID) {
                case .failure(let reason): return .reject(reason)
                case .success(let policy):
                    if let reason = injected() { return .reject(reason) }
                    return .management(
                        status: 200, headers: [:], body: Self.json(["message-storage-policy": policy.rawValue, "push-type": "LiveActivity"]))
                }
            default:
                switch channel(header("apns-channel-id"), bundleID: bundleID) {
                case .failure(let reason): return .reject(reason)
                case .success:
                    if let reason = injected() { return .reject(reason) }
                    guard let id = header("apns-channel-id"), state.deleteChannel(bundleID: bundleID, id: id) else {
                        return .reject(.channelNotRegistered)
                    }
                    return .management(status: 204, headers: [:], body: [])
                }
            }
        }
    }

    /// The named channel's storage policy, or why APNs would refuse the name.
    private func channel(_ id: String?, bundleID: String) -> Lookup {
        guard let id, !id.isEmpty else { return .failure(.missingChannelId) }
        do { try APNsChannel.validate(id: id) } catch { return .failure(.badChannelId) }
        guard let policy = state.channelPolicy(bundleID: bundleID, id: id) else { return .failure(.channelNotRegistered) }
        return .success(policy)
    }

    private enum Lookup {
        case success(APNsChannelStoragePolicy)
        case failure(APNsErrorReason)
    }

    private static func json(_ object: [String: Any]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }
}
