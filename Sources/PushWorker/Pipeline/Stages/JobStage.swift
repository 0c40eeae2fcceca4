import DeviceTokens
import Stores

/// One decision taken about a job before its devices are sent: an idempotency key, a `send_at`
/// or `local_time` hold, quiet hours, frequency caps. Each is a stage of its own, tested alone
/// with an injected clock; `JobStages.assemble` puts them in order, and a worker without a ledger
/// simply has fewer. A new rule (a platform's, a tenant's) is one more stage, not one more branch
/// in `JobPipeline`.
public protocol JobStage: Sendable {
    /// Whether it decides on the job's recipients, after the audience is read, rather than on the
    /// job alone, before. The job's stages run first, then the audience is read (or the job is
    /// split, or broadcast), then the recipients' stages, each group in the assembly's order.
    var onRecipients: Bool { get }
    /// What happens next: on to the next stage (having taken recipients out into `withheld`, or
    /// held some in the schedule), or the job ends here.
    func decide(_ job: inout StagedJob) async throws -> StageVerdict
}

/// What the stages see of a job and may change: its recipients, and those kept from a send.
public struct StagedJob: Sendable {
    public var job: PushJob
    public let delivery: JobDelivery
    /// Where its results and summary go.
    public let replyTo: String
    /// Its devices to send to; nil while the audience is not read yet (the job's own stages).
    public var recipients: [Recipient]?
    /// Devices kept from this send, each with the reason its result gives (outcome `filtered`).
    public var withheld: [(recipient: Recipient, reason: String)] = []
    /// Devices held in the schedule to be sent later (counted in the summary).
    public var deferred = 0
    /// The tokens the job names itself, read once by whoever needs them first.
    let tokens: JobTokens

    public init(job: PushJob, delivery: JobDelivery, replyTo: String, recipients: [Recipient]? = nil, tokens: DeviceTokenList? = nil) {
        self.job = job
        self.delivery = delivery
        self.replyTo = replyTo
        self.recipients = recipients
        self.tokens = JobTokens(streamed: tokens, named: job.audience.tokens, android: job.audience.isResolved ? [] : job.audience.fcmTokens)
        // Held once, in `tokens` (a broadcast's audience has none).
        if job.audience.channel == nil { self.job.audience.tokens = [] }
    }

    /// A new job, not a chunk or retry of one (those carry no key and no hold of their own).
    var isWhole: Bool { delivery.chunk == nil }
}

/// How a stage's decision ends.
public enum StageVerdict: Sendable {
    /// On to the next stage.
    case goOn
    /// The job ends here: `summary`, if any, is published to the reply queue, then `published`
    /// runs (what the log says once it is so), and the job is settled so, counted as `outcome`.
    case settle(summary: JobSummary?, JobSettlement, outcome: WorkerMetrics.JobOutcome, published: (@Sendable () -> Void)? = nil)
    /// The job is invalid here: dead-lettered with this error.
    case refuse(JobError)
}
