/// Which of the worker's two ways through a job came: producers' jobs take the now lane, the
/// chunks of a job too large for it take the bulk lane. Each has its own queue, consumer and
/// results connection, so a one-device job published during a broadcast is taken at once and
/// sent through the share of the app's admission slots that the bulk lane never uses
/// (`DeviceAdmission`).
public enum Lane: String, Sendable, CaseIterable {
    case now
    case bulk
}
