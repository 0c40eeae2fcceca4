import Stores
import Foundation

/// Closes a job (or chunk) on the reply queue, `type` = `summary`: how many devices ended how.
/// For a refused job it carries the error instead.
public struct JobSummary: Sendable, Hashable, Codable {
    public var jobID: String
    public var app: String?
    public var devices: Int
    public var outcomes: [Outcome: Int]
    public var error: JobError?
    public var durationMilliseconds: Int
    /// `"2/5"` for the second of five chunks of a split job; nil for a job sent whole.
    public var chunk: String?
    /// Devices handed on to a retry job: their results come with that job's summary.
    public var retrying = 0
    /// Devices the registry removed or marked invalid because APNs called them dead.
    public var removed = 0
    /// The job that took this job's `idempotency_key` first: this one sent nothing.
    public var duplicateOf: String?
    /// The job has a `send_at` ahead and is held until then (RFC 3339, UTC): nothing sent yet. Its
    /// results come once it is released.
    public var scheduledFor: String?
    /// Devices held until their users' quiet hours end: their results come with the summary of
    /// the part that sends them (`chunk` "deferred").
    public var deferred = 0
    /// Devices of a job that came back whose result the ledger held but no reply was confirmed
    /// for (`results: batched`): their result was published again from the ledger's record,
    /// with no push.
    public var fromLedger = 0

    public init(jobID: String, app: String?, devices: Int, outcomes: [Outcome: Int], error: JobError? = nil, durationMilliseconds: Int) {
        self.jobID = jobID
        self.app = app
        self.devices = devices
        self.outcomes = outcomes
        self.error = error
        self.durationMilliseconds = durationMilliseconds
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "job_id", app, devices, outcomes, error
        case durationMilliseconds = "duration_ms"
        case chunk, retrying, removed
        case duplicateOf = "duplicate_of"
        case scheduledFor = "scheduled_for"
        case deferred
        case fromLedger = "from_ledger"
    }

    enum ErrorKeys: String, CodingKey { case code, field, message }

    /// Reads a summary as a producer receives it (tests, benchmarks, tools).
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        jobID = try container.decode(String.self, forKey: .jobID)
        app = try container.decodeIfPresent(String.self, forKey: .app)
        devices = try container.decode(Int.self, forKey: .devices)
        let counts = try container.decode([String: Int].self, forKey: .outcomes)
        outcomes = Dictionary(uniqueKeysWithValues: counts.compactMap { key, count in Outcome(rawValue: key).map { ($0, count) } }.filter { $0.1 != 0 })
        if try container.decodeNil(forKey: .error) {
            error = nil
        } else {
            let nested = try container.nestedContainer(keyedBy: ErrorKeys.self, forKey: .error)
            let code = try nested.decode(String.self, forKey: .code)
            guard let known = JobError.Code(rawValue: code) else {
                throw DecodingError.dataCorruptedError(forKey: .code, in: nested, debugDescription: "unknown error code '\(code)'")
            }
            error = JobError(known, field: try nested.decodeIfPresent(String.self, forKey: .field), try nested.decode(String.self, forKey: .message))
        }
        durationMilliseconds = try container.decode(Int.self, forKey: .durationMilliseconds)
        chunk = try container.decodeIfPresent(String.self, forKey: .chunk)
        retrying = try container.decode(Int.self, forKey: .retrying)
        removed = try container.decodeIfPresent(Int.self, forKey: .removed) ?? 0
        duplicateOf = try container.decodeIfPresent(String.self, forKey: .duplicateOf)
        scheduledFor = try container.decodeIfPresent(String.self, forKey: .scheduledFor)
        deferred = try container.decodeIfPresent(Int.self, forKey: .deferred) ?? 0
        fromLedger = try container.decodeIfPresent(Int.self, forKey: .fromLedger) ?? 0
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(jobID, forKey: .jobID)
        try container.encode(app, forKey: .app)
        try container.encode(devices, forKey: .devices)
        // Every outcome appears, zero or not, so consumers need no defaults.
        try container.encode(
            Dictionary(uniqueKeysWithValues: Outcome.allCases.map { ($0.rawValue, outcomes[$0] ?? 0) }), forKey: .outcomes)
        if let error {
            var nested = container.nestedContainer(keyedBy: ErrorKeys.self, forKey: .error)
            try nested.encode(error.code.rawValue, forKey: .code)
            try nested.encode(error.field, forKey: .field)
            try nested.encode(error.message, forKey: .message)
        } else {
            try container.encodeNil(forKey: .error)
        }
        try container.encode(durationMilliseconds, forKey: .durationMilliseconds)
        try container.encode(chunk, forKey: .chunk)
        try container.encode(retrying, forKey: .retrying)
        try container.encode(removed, forKey: .removed)
        try container.encode(duplicateOf, forKey: .duplicateOf)
        try container.encode(scheduledFor, forKey: .scheduledFor)
        try container.encode(deferred, forKey: .deferred)
        try container.encode(fromLedger, forKey: .fromLedger)
    }

    /// The outcomes in the order a sorted-keys writer puts them.
    private static let sortedOutcomes = Outcome.allCases.sorted { $0.rawValue < $1.rawValue }

    /// The summary as the worker publishes it: the bytes `JSONEncoder` with sorted keys makes
    /// from `encode(to:)` (a test holds them equal), spliced by hand, because a one-device job
    /// has a summary each and the encoder was a tenth of such a job's CPU.
    public var json: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256 + jobID.utf8.count + (error?.message.utf8.count ?? 0))
        func string(_ text: String?) {
            if let text { JSONText.appendString(text, to: &bytes) } else { bytes += "null".utf8 }
        }
        func number(_ value: Int) { bytes += String(value).utf8 }
        bytes += #"{"app":"#.utf8
        string(app)
        bytes += #","chunk":"#.utf8
        string(chunk)
        bytes += #","deferred":"#.utf8
        number(deferred)
        bytes += #","devices":"#.utf8
        number(devices)
        bytes += #","duplicate_of":"#.utf8
        string(duplicateOf)
        bytes += #","duration_ms":"#.utf8
        number(durationMilliseconds)
        bytes += #","error":"#.utf8
        if let error {
            bytes += #"{"code":"#.utf8
            string(error.code.rawValue)
            bytes += #","field":"#.utf8
            string(error.field)
            bytes += #","message":"#.utf8
            string(error.message)
            bytes.append(UInt8(ascii: "}"))
        } else {
            bytes += "null".utf8
        }
        bytes += #","from_ledger":"#.utf8
        number(fromLedger)
        bytes += #","job_id":"#.utf8
        string(jobID)
        bytes += #","outcomes":{"#.utf8
        for (index, outcome) in Self.sortedOutcomes.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(outcome.rawValue)
            bytes.append(UInt8(ascii: ":"))
            number(outcomes[outcome] ?? 0)
        }
        bytes += #"},"removed":"#.utf8
        number(removed)
        bytes += #","retrying":"#.utf8
        number(retrying)
        bytes += #","scheduled_for":"#.utf8
        string(scheduledFor)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}
