import APNs
import Foundation
import Logging
import Registry

/// Resolves a job's audience from the registry: its tokens (with the users they are connected to),
/// the devices of its users and of its groups' members, for the job's app; then drops the devices
/// whose users' preferences exclude the job's type, and reports them as filtered.
public struct RegistryResolver: AudienceResolver, DeviceFeedback {
    public let store: any RegistryStore
    private let logger: Logger

    /// Devices read from the store at a time.
    static let pageSize = 1000

    public init(store: any RegistryStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    public func resolve(_ job: PushJob) async throws -> ResolvedAudience {
        // A token the producer names is sent whether the registry knows it or not; the registry
        // only says whose it is.
        let owners = try await store.users(app: job.app, tokens: job.audience.tokens)
        var devices = job.audience.tokens.map { RegisteredDevice(token: $0, user: owners[$0]) }
        if !job.audience.users.isEmpty || !job.audience.groups.isEmpty {
            try await store.devices(app: job.app, users: job.audience.users, groups: job.audience.groups, pageSize: Self.pageSize) { page in
                devices += page
            }
        }
        guard job.type != nil else {
            return ResolvedAudience(recipients: devices.map { Recipient(token: $0.token, user: $0.user) })
        }
        let preferences = try await store.preferences(of: Set(devices.compactMap(\.user)))
        var audience = ResolvedAudience(recipients: [])
        for device in devices {
            let recipient = Recipient(token: device.token, user: device.user)
            if let user = device.user, let rules = preferences[user], !rules.allows(type: job.type, subtype: job.subtype) {
                audience.filtered.append(recipient)
            } else {
                audience.recipients.append(recipient)
            }
        }
        return audience
    }

    public func deviceRejected(app: String, token: String, reason: APNsErrorReason, at timestamp: Date?) async -> Bool {
        do {
            guard try await store.deviceRejected(app: app, token: token, reason: reason, at: timestamp) else { return false }
            logger.info("device removed from the registry", metadata: ["app": "\(app)", "token": "\(token.prefix(8))…", "reason": "\(reason.rawValue)"])
            return true
        } catch {
            logger.error("cannot record a dead device in the registry", metadata: ["app": "\(app)", "token": "\(token.prefix(8))…", "error": "\(error)"])
            return false
        }
    }
}
