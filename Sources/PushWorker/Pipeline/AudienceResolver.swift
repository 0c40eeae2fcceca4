/// Turns a job's audience into the devices to reach, dropping those whose owners' preferences
/// exclude the job (returned with outcome `filtered`). The seam the registry fills: users and
/// groups are resolved, and preferences applied, by the registry's resolver. It knows nothing of
/// retries or chunks: the pipeline resolves chunk and retry jobs through it like any job.
public protocol AudienceResolver: Sendable {
    func resolve(_ job: PushJob) async throws -> ResolvedAudience
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

    /// Each device once: the first time it is named wins, and a device that is also reachable
    /// some other way is not reported filtered. The one place a job's devices are deduplicated
    /// (a streamed job's token bytes are sorted and deduplicated as they are stored).
    func deduplicated() -> ResolvedAudience {
        var seen = Set<String>()
        var audience = self
        audience.recipients = recipients.filter { seen.insert($0.token).inserted }
        audience.filtered = filtered.filter { seen.insert($0.token).inserted }
        return audience
    }
}

/// Explicit tokens only, which is all a worker without a registry can reach.
public struct ExplicitTokenResolver: AudienceResolver {
    public init() {}

    public func resolve(_ job: PushJob) async throws -> ResolvedAudience {
        let unresolved = job.audience.users.map { "user \($0)" } + job.audience.groups.map { "group \($0)" }
        return ResolvedAudience(recipients: job.audience.tokens.map { Recipient(token: $0) }, unresolved: unresolved)
    }
}
