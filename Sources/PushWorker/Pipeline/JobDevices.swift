/// The devices of a job (or of one part of it) as the audience and the stages sorted them, before
/// anything is sent: whom to send, whom the job must not reach and why, and how many wait for
/// another part. Every device the summary counts is in exactly one of these.
public struct JobDevices: Sendable {
    /// Sent, in this order.
    public var send: [Recipient]
    /// Excluded by their owners' preferences: outcome `filtered`, no request.
    public var filtered: [Recipient]
    /// Kept from the job by their users' quiet hours (`quiet_hours`) or a frequency cap
    /// (`frequency_cap`): outcome `filtered` with that reason, no request.
    public var withheld: [(recipient: Recipient, reason: String)]
    /// Held until their users' quiet hours end: counted in the summary, their results come with
    /// the part of the job that sends them.
    public var deferred: Int

    public init(send: [Recipient], filtered: [Recipient] = [], withheld: [(recipient: Recipient, reason: String)] = [], deferred: Int = 0) {
        self.send = send
        self.filtered = filtered
        self.withheld = withheld
        self.deferred = deferred
    }

    /// All the summary counts.
    var count: Int { send.count + filtered.count + withheld.count + deferred }

    /// Drops the devices whose tokens `held` has (the ledger's records of a job that came back).
    mutating func removeAll(heldIn held: [String: some Any]) {
        send.removeAll { held[$0.token] != nil }
        filtered.removeAll { held[$0.token] != nil }
        withheld.removeAll { held[$0.recipient.token] != nil }
    }

    /// The tokens of every device that has a result to give.
    var tokens: [String] { (send + filtered).map(\.token) + withheld.map(\.recipient.token) }
}

/// Which delivery of a job the processor works on, and what may stop it half-way.
public struct JobPart: Sendable {
    /// The chunk label (a chunk job's, a `local_time` part's); nil for a whole job.
    public var chunk: String?
    /// The job may have been here before (redelivered, or made from a job that was): devices the
    /// ledger holds are not sent again.
    public var mayRepeat: Bool
    /// False once the job's connection is gone: the broker delivers it again, so no more is sent.
    public var isCurrent: @Sendable () -> Bool
    /// Whether the job was cancelled (`cancel_job`), asked before each batch of devices: the
    /// devices not sent by then get outcome `cancelled`.
    public var cancelled: (@Sendable () async -> Bool)?

    public init(chunk: String? = nil, mayRepeat: Bool = false, isCurrent: @escaping @Sendable () -> Bool = { true }, cancelled: (@Sendable () async -> Bool)? = nil) {
        self.chunk = chunk
        self.mayRepeat = mayRepeat
        self.isCurrent = isCurrent
        self.cancelled = cancelled
    }
}
