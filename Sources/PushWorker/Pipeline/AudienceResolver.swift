/// Turns a job's audience into the devices to reach, dropping those whose owners' preferences
/// exclude the job (handed over as `filtered`). The seam the registry fills: users and groups are
/// resolved, and preferences applied, by the registry's resolver. It knows nothing of retries or
/// chunks: chunk and retry jobs carry their devices already resolved.
public protocol AudienceResolver: Sendable {
    /// Reads the job's audience once, `explicit` first, each device once, and hands it to `body`,
    /// which learns the number of devices before it reads them page by page: a group of a million
    /// members goes from the store into chunk jobs without ever being held whole. The stream is
    /// valid inside `body` only.
    func resolve(_ job: PushJob, explicit: ExplicitTokens, pageSize: Int, _ body: (any AudienceStream) async throws -> Void) async throws
}

/// A job's resolved audience.
public protocol AudienceStream {
    /// The devices it reaches, filtered ones included: exactly as many as its pages hand over.
    var count: Int { get }
    /// Users or groups nobody could resolve (a worker without a registry): reported, not
    /// silently dropped.
    var unresolved: [String] { get }
    /// The devices in pages of at most the resolver's page size. Called once: a stream may give
    /// the memory of what it has handed over back to the system.
    func forEachPage(_ body: (AudiencePage) async throws -> Void) async throws
}

/// Some devices a job reaches, and some its preferences filtered out.
public struct AudiencePage: Sendable {
    public var recipients: [Recipient]
    public var filtered: [Recipient]

    public init(recipients: [Recipient] = [], filtered: [Recipient] = []) {
        self.recipients = recipients
        self.filtered = filtered
    }

    public var count: Int { recipients.count + filtered.count }
}

/// Explicit tokens only, which is all a worker without a registry can reach.
public struct ExplicitTokenResolver: AudienceResolver {
    public init() {}

    public func resolve(_ job: PushJob, explicit: ExplicitTokens, pageSize: Int, _ body: (any AudienceStream) async throws -> Void) async throws {
        let unresolved = job.audience.users.map { "user \($0)" } + job.audience.groups.map { "group \($0)" }
            + (job.audience.activity.map { ["activity \($0)"] } ?? [])
        try await body(Stream(explicit: explicit, pageSize: pageSize, unresolved: unresolved))
    }

    private struct Stream: AudienceStream {
        let explicit: ExplicitTokens
        let pageSize: Int
        let unresolved: [String]

        var count: Int { explicit.count }

        func forEachPage(_ body: (AudiencePage) async throws -> Void) async throws {
            for range in explicit.pages(of: pageSize) {
                let page = AudiencePage(recipients: explicit.recipients(range))
                // Read once, in order: the page's tokens are strings now.
                explicit.discard(upTo: range.upperBound)
                try await body(page)
            }
        }
    }
}
