import APNs
import Foundation
import Logging
import Stores

/// Resolves a job's audience from the registry: its tokens (with the users they are connected to),
/// then the devices of its users and of its groups' members, for the job's app (a Live Activity
/// job: its push-to-start or activity tokens, `PushJob.registryApp`), page by page;
/// each page is filtered by its users' preferences as it goes (the store reads them with the
/// devices), so nothing is held but the page in hand.
public struct RegistryResolver: AudienceResolver, DeviceFeedback, BadgeCounter {
    public let store: any RegistryStore
    private let logger: Logger

    /// Explicit tokens checked against the audience in one query.
    static let overlapBatch = 10_000

    public init(store: any RegistryStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    public func resolve(_ job: PushJob, explicit: ExplicitTokens, pageSize: Int, _ body: (any AudienceStream) async throws -> Void) async throws {
        let app = job.registryApp
        let read: ((any RegistryAudience) async throws -> Void) async throws -> Void
        if job.audience.activity != nil {
            // An update or end naming an activity: every token registered for it.
            read = { try await store.withAllDevices(app: app, $0) }
        } else if !job.audience.users.isEmpty || !job.audience.groups.isEmpty {
            read = { try await store.withAudience(app: app, users: job.audience.users, groups: job.audience.groups, $0) }
        } else {
            try await body(Stream(job: job, store: store, explicit: explicit, audience: nil, pageSize: pageSize, count: explicit.count))
            return
        }
        try await read { audience in
            // Named tokens the audience also reaches are sent once, as named ones.
            var overlap = 0
            for range in explicit.pages(of: Self.overlapBatch) {
                overlap += try await audience.count(among: explicit.tokens(range))
            }
            let count = explicit.count + (try await audience.count()) - overlap
            try await body(Stream(job: job, store: store, explicit: explicit, audience: audience, pageSize: pageSize, count: count))
        }
    }

    private struct Stream: AudienceStream {
        let job: PushJob
        let store: any RegistryStore
        let explicit: ExplicitTokens
        let audience: (any RegistryAudience)?
        let pageSize: Int
        let count: Int
        var unresolved: [String] { [] }

        func forEachPage(_ body: (AudiencePage) async throws -> Void) async throws {
            // A token the producer names is sent whether the registry knows it or not; the
            // registry only says whose it is.
            for range in explicit.pages(of: pageSize) {
                let tokens = explicit.tokens(range)
                // Without users or groups nothing asks `contains` later: the tokens are read once.
                if audience == nil { explicit.discard(upTo: range.upperBound) }
                let known: [String: RegisteredDevice]
                if let audience {
                    known = try await audience.devices(tokens: tokens)
                } else {
                    known = try await store.devices(app: job.registryApp, tokens: tokens)
                }
                try await body(page(zip(range, tokens).map { index, token in
                    known[token] ?? RegisteredDevice(token: token, user: nil, platform: explicit.platform(at: index))
                }))
            }
            try await audience?.pages(size: pageSize) { devices in
                try await body(page(explicit.count == 0 ? devices : devices.filter { !explicit.contains($0.token) }))
            }
        }

        private func page(_ devices: [RegisteredDevice]) -> AudiencePage {
            var page = AudiencePage()
            page.recipients.reserveCapacity(devices.count)
            for device in devices {
                let recipient = Recipient(token: device.token, user: device.user, platform: device.platform)
                if let preferences = device.preferences, !preferences.allows(type: job.type, subtype: job.subtype) {
                    page.filtered.append(recipient)
                } else {
                    page.recipients.append(recipient)
                }
            }
            return page
        }
    }

    public func incrementBadges(app: String, tokens: [String], by amount: Int, job: String) async throws -> [String: Int] {
        try await store.incrementBadges(app: app, tokens: tokens, by: amount, job: job)
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
