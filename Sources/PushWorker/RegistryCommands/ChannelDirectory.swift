import APNs
import Foundation
import Stores

/// Each app's broadcast channels on APNs, for the registry service's channel requests
/// (`create_channel`, `list_channels`, `show_channel`, `delete_channel`): the app's credentials,
/// its management host, and its bundle id (the topic without a push type's suffix).
public final class ChannelDirectory: Sendable {
    /// Per app name: its manager and its bundle id.
    private let managers: [String: (manager: any ChannelManaging, bundleID: String)]

    /// - Parameter managers: per app name, built by the assembly with the worker's provider-token
    ///   source for the app's key, so that channel management sends the pushes' token.
    public init(managers: [String: (manager: any ChannelManaging, bundleID: String)]) {
        self.managers = managers
    }

    /// Refuses further requests (those under way finish).
    public func shutdown() {
        for entry in managers.values { entry.manager.shutdown() }
    }

    /// Carries the request out on APNs; the answer is the reply's JSON object (besides `"ok"`).
    /// APNs' refusals, and credentials it cannot take, are `apns_rejected` naming the reason; its
    /// trouble (429, 5xx, no answer) is `apns_unavailable`. Either is answered, never requeued.
    func perform(_ request: ChannelRequest) async throws(StoreError) -> [String: Any] {
        guard let (manager, bundleID) = managers[request.app] else {
            throw StoreError(.unknownApp, field: "app",
                "app '\(request.app)' is not one the workers serve (configured: \(managers.keys.sorted().joined(separator: ", ")))")
        }
        do {
            switch request {
            case .create(_, let policy):
                let channel = try await manager.create(bundleID: bundleID, storagePolicy: APNsChannelStoragePolicy(rawValue: policy) ?? .mostRecentMessageStored)
                return ["channel": Self.json(channel, policy: policy)]
            case .list:
                return ["channels": try await manager.channels(bundleID: bundleID)]
            case .show(_, let id):
                return ["channel": Self.json(try await manager.channel(bundleID: bundleID, id: id), policy: nil)]
            case .delete(_, let id):
                try await manager.delete(bundleID: bundleID, id: id)
                return ["deleted": id]
            }
        } catch {
            throw Self.registryError(error, request: request)
        }
    }

    private static func json(_ channel: APNsChannel, policy: Int?) -> [String: Any] {
        [
            "id": channel.id,
            "message_storage_policy": (channel.storagePolicy?.rawValue ?? policy).map { $0 as Any } ?? NSNull(),
            "request_id": channel.requestID.map { $0 as Any } ?? NSNull(),
        ]
    }

    static func registryError(_ error: APNsChannelError, request: ChannelRequest) -> StoreError {
        switch error {
        case .rejected(let status, _, _) where status == 429 || status >= 500:
            return StoreError(.apnsUnavailable, "\(request.name): \(error)")
        case .rejected(_, let reason, _):
            let field: String? = switch reason?.rawValue {
            case "BadChannelId", "ChannelNotRegistered", "MissingChannelId": "channel"
            default: nil
            }
            return StoreError(.apnsRejected, field: field, "\(request.name): \(error)")
        case .invalidRequest(let problem):
            return StoreError(.invalidField, field: problem.field, "\(request.name): \(problem.message)")
        case .credentials:
            return StoreError(.apnsRejected, "\(request.name): \(error)")
        case .transport:
            return StoreError(.apnsUnavailable, "\(request.name): \(error)")
        }
    }
}
