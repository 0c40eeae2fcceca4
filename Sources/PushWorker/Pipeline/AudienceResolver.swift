/// Turns a job's audience into the devices to reach, dropping those whose owners' preferences
/// exclude the job (returned with outcome `filtered`). The seam the registry fills: users and
/// groups are resolved, and preferences applied, by the registry's resolver.
public protocol AudienceResolver: Sendable {
    func resolve(_ job: PushJob, previousAttempts: [Int]?) async throws -> ResolvedAudience
}

/// The devices a job reaches, and those its preferences filtered out.
public struct ResolvedAudience: Sendable {
    public var recipients: [Recipient]
    public var filtered: [Recipient]
    /// Users or groups this resolver cannot resolve (no registry): reported, not silently dropped.
    public var unresolved: [String]

    public init(recipients: [Recipient], filtered: [Recipient] = [], unresolved: [String] = []) {
        self.recipients = recipients
        self.filtered = filtered
        self.unresolved = unresolved
    }
}

/// Explicit tokens only, which is all a worker without a registry can reach. A retry job's
/// devices keep the attempts they carry.
public struct ExplicitTokenResolver: AudienceResolver {
    public init() {}

    public func resolve(_ job: PushJob, previousAttempts: [Int]?) async throws -> ResolvedAudience {
        let recipients = job.audience.tokens.enumerated().map { index, token in
            Recipient(token: token, previousAttempts: previousAttempts.flatMap { index < $0.count ? $0[index] : nil } ?? 0)
        }
        let unresolved = job.audience.users.map { "user \($0)" } + job.audience.groups.map { "group \($0)" }
        return ResolvedAudience(recipients: recipients, unresolved: unresolved)
    }
}
