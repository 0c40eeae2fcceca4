import Foundation
import Stores

/// The job's timing section: its idempotency key, and when it is sent (`send_at`, `local_time`,
/// `quiet_hours`).
extension JobDecoder {
    func decodeIdempotencyKey(_ fields: inout JobFields) throws(JobError) -> String? {
        let idempotencyKey = try fields.string("idempotency_key")
        if let idempotencyKey, idempotencyKey.isEmpty || idempotencyKey.utf8.count > 255 || idempotencyKey.utf8.contains(0) {
            throw JobError(.invalidField, field: "idempotency_key", "idempotency_key must be 1 to 255 bytes, without NUL")
        }
        return idempotencyKey
    }

    func decodeTiming(_ fields: inout JobFields, _ object: [String: Any], into job: inout PushJob) throws(JobError) {
        job.sendAt = try Self.sendAt(object["send_at"])
        if let text = try fields.string("local_time") {
            job.localTime = try LocalTime(text)
            guard job.sendAt == nil else {
                throw JobError(.invalidField, field: "local_time", "local_time and send_at exclude each other: local_time sends at a wall-clock time in each device's zone, send_at at one instant for all")
            }
            guard job.audience.channel == nil else {
                throw JobError(.invalidField, field: "local_time", "local_time needs devices to place in their zones; a broadcast to a channel has none (use send_at)")
            }
        }
        if let text = try fields.string("quiet_hours") {
            guard let mode = PushJob.QuietHoursMode(rawValue: text) else {
                throw JobError(.invalidField, field: "quiet_hours", "quiet_hours '\(text)' is not defer, drop or ignore")
            }
            job.quietHours = mode
        }
    }

    /// `send_at`: an RFC 3339 time, or Unix seconds as `expiration` takes them (`RFC3339`'s one
    /// reading of a time, as `get_deliveries` and the command line use it).
    static func sendAt(_ value: Any?) throws(JobError) -> Date? {
        guard let value, !JSONValue.isNull(value) else { return nil }
        if let milliseconds = RFC3339.milliseconds(json: value) { return Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        switch value {
        case let text as String:
            throw JobError(.invalidField, field: "send_at", "send_at '\(text)' is not an RFC 3339 time (2026-11-27T09:00:00Z, or with an offset: 2026-11-27T09:00:00+01:00)")
        case let number as NSNumber where !JSONValue.isBoolean(number):
            throw JobError(.invalidField, field: "send_at", "send_at \(number) is not a Unix time in whole seconds")
        default:
            throw JobError(.invalidField, field: "send_at", "send_at must be an RFC 3339 time (2026-11-27T09:00:00Z) or Unix seconds")
        }
    }
}
