/// What becomes of a delivery once the pipeline is done with it.
public enum JobSettlement: Sendable, Hashable {
    /// Every device has a confirmed result, or was handed on, or the job was dead-lettered by
    /// republishing: acknowledge it.
    case acknowledge
    /// Results or hand-ons could not all be confirmed: give it back; the queue's delivery limit
    /// dead-letters a job that keeps failing.
    case requeue
    /// Refused but too large to republish with the reason (its body was streamed, never held):
    /// reject it, and the broker dead-letters the original.
    case reject
}
