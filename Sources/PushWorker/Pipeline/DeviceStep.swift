import APNs

/// What becomes of a device after an answer, or the lack of one, from APNs: the one place the
/// pipeline reads an answer's meaning. A pure function of the answer and the attempts made, so
/// the rule is tested by table (`DeviceStepTests`) and `JobProcessor` only carries it out
/// (sleeping, sending, telling the registry, publishing).
enum DeviceStep: Equatable {
    /// The device's final outcome. `deadDevice`: the reason the registry should hear of (a
    /// rejection that says the device is gone or invalid for the app).
    case finish(Outcome, deadDevice: APNsErrorReason? = nil)
    /// Send again from this worker, after the policy's pause.
    case retry
    /// Still failing, and this worker's share of attempts is spent: a later round, after a
    /// longer pause, continues (a retry job).
    case handOn

    /// - Parameters:
    ///   - attempts: sends made to the device so far, this one and earlier rounds' included.
    ///   - previousAttempts: those made by earlier rounds.
    static func after(
        _ answer: Result<APNsResponse, APNsClientError>, attempts: Int, previousAttempts: Int, policy: RetryPolicy
    ) -> DeviceStep {
        switch answer {
        case .success(let response):
            if response.isDelivered { return .finish(.delivered) }
            if response.disposition == .final {
                return .finish(.rejected, deadDevice: response.reason.flatMap { $0.deviceFate == nil ? nil : $0 })
            }
        case .failure(let error):
            // A request that breaks APNs' rules was never sent, and never will be.
            if case .invalidRequest = error { return .finish(.rejected) }
            guard error.isRetryable else { return .finish(.failed) }
        }
        guard attempts < policy.maxAttempts else { return .finish(.failed) }
        return attempts - previousAttempts >= policy.inProcessAttempts ? .handOn : .retry
    }
}
