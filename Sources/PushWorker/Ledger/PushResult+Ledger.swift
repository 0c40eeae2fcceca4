import Foundation
import Stores

extension PushResult {
    /// The ledger's record of this result, made final now.
    /// - Parameter message: the `results: batched` message it waits in, not yet confirmed.
    func ledgerRecord(chunk: String?, message: Int64? = nil, at date: Date = Date()) -> DeliveryRecord {
        DeliveryRecord(
            jobID: jobID, chunk: chunk, app: app, token: token, user: user, outcome: outcome.rawValue, status: status, reason: reason,
            apnsID: apnsID, apnsUniqueID: apnsUniqueID, attempts: attempts, at: DeliveryRecord.milliseconds(date),
            channel: channel, requestID: requestID, timestamp: timestamp, resultsMessage: message, fcmName: fcmName)
    }

    /// The result a ledger's record keeps, field for field: published again, without a push,
    /// for a device of a job that came back whose first result was never confirmed.
    init(_ record: DeliveryRecord) {
        self.init(
            jobID: record.jobID, token: record.token, user: record.user, app: record.app, outcome: Outcome(rawValue: record.outcome) ?? .failed,
            status: record.status, apnsID: record.apnsID, apnsUniqueID: record.apnsUniqueID, reason: record.reason, timestamp: record.timestamp,
            attempts: record.attempts)
        channel = record.channel
        requestID = record.requestID
        if !record.token.isEmpty, record.platform == .fcm {
            platform = .fcm
            fcmName = record.fcmName
        }
    }
}
