import Foundation
import Registry

extension PushResult {
    /// The ledger's record of this result, made final now.
    func ledgerRecord(chunk: String?, at date: Date = Date()) -> DeliveryRecord {
        DeliveryRecord(
            jobID: jobID, chunk: chunk, app: app, token: token, user: user, outcome: outcome.rawValue, status: status, reason: reason,
            apnsID: apnsID, apnsUniqueID: apnsUniqueID, attempts: attempts, at: Int64((date.timeIntervalSince1970 * 1000).rounded()),
            channel: channel, requestID: requestID)
    }
}
