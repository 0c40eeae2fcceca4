/// Raises the badge counters of a job's devices (the registry, when there is one), for jobs whose
/// payload says `"badge": "increment"`.
public protocol BadgeCounter: Sendable {
    /// The counts reached by each registered token; an unregistered one is absent. A job raises
    /// a device's counter once, however often its devices are sent.
    func incrementBadges(app: String, tokens: [String], by amount: Int, job: String) async throws -> [String: Int]
}
