import Foundation

/// Closes a job (or chunk) on the reply queue, `type` = `summary`: how many devices ended how.
/// For a refused job it carries the error instead.
public struct JobSummary: Sendable, Hashable, Encodable {
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
        case chunk, retrying
    }

    enum ErrorKeys: String, CodingKey { case code, field, message }

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
    }
}
