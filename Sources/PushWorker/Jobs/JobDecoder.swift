import APNs
import Foundation
import Stores

/// Turns a message body into a `PushJob`, or a `JobError` that names the field. Every rule of the
/// job contract is checked here, before anything is resolved or sent.
public struct JobDecoder: Sendable {
    /// The configured apps by name, each with its default topic (bundle id): a push type that
    /// needs a topic suffix is checked against the topic the job will really be sent with.
    public var apps: [String: String]
    /// Per app, the expiration of jobs that name none (`apps[].default_expiration`).
    public var defaultExpirations: [String: DefaultExpiration]
    /// Per app, the results mode of jobs that name none (`apps[].default_results`); else `all`.
    public var defaultResults: [String: PushJob.ResultsMode]

    public init(apps: [String: String], defaultExpirations: [String: DefaultExpiration] = [:], defaultResults: [String: PushJob.ResultsMode] = [:]) {
        self.apps = apps
        self.defaultExpirations = defaultExpirations
        self.defaultResults = defaultResults
    }

    /// Known top-level fields; anything else is refused, so a misspelt option (`colapse_id`)
    /// is an error instead of being silently ignored.
    static let fields: Set<String> = [
        "id", "app", "audience", "type", "subtype", "payload", "push_type", "priority", "expiration",
        "collapse_id", "topic", "results", "reply_to", "live_activity", "idempotency_key", "send_at", "quiet_hours", "local_time",
        "notification", "fcm",
    ]
    /// Written by pushworker into chunk and retry jobs only: where their tokens live in the registry.
    static let chunkFields: Set<String> = ["token_namespace"]

    /// - Parameters:
    ///   - messageID: the AMQP message_id, the default job id.
    ///   - enqueuedAt: when the job was published (AMQP timestamp), for relative expirations.
    ///   - chunk: the body is a chunk or retry job a worker published (`x-pushworker-chunk`): its
    ///     audience may carry resolved `devices` and `filtered` pairs, which a producer's may not.
    public func decode(_ body: [UInt8], messageID: String? = nil, enqueuedAt: Date = Date(), chunk: Bool = false) throws(JobError) -> PushJob {
        let object: [String: Any]
        do {
            guard let parsed = try JSONDocument.parse(body) as? [String: Any] else {
                throw JobError(.invalidJSON, field: nil, "the job must be a JSON object")
            }
            object = parsed
        } catch let error as JobError {
            throw error
        } catch {
            throw JobError(.invalidJSON, field: nil, "the job is \(error)")
        }
        var fields = JobFields(object)

        let isKnown = { (key: String) in Self.fields.contains(key) || (chunk && Self.chunkFields.contains(key)) }
        if object.keys.contains(where: { !isKnown($0) }), let unknown = object.keys.filter({ !isKnown($0) }).sorted().first {
            throw JobError(.invalidField, field: unknown, "\(unknown) is not a job field (misspelt?)")
        }
        let id = try fields.string("id") ?? messageID ?? UUID().uuidString.lowercased()
        guard !id.isEmpty else { throw JobError(.invalidField, field: "id", "id is empty") }

        let app: String
        let appTopic: String
        if let named = try fields.string("app") {
            guard let topic = apps[named] else {
                throw JobError(.unknownApp, field: "app", "app '\(named)' is not configured (configured: \(apps.keys.sorted().joined(separator: ", ")))")
            }
            (app, appTopic) = (named, topic)
        } else if apps.count == 1, let only = apps.first {
            (app, appTopic) = only
        } else {
            throw JobError(.unknownApp, field: "app", "app is required when several apps are configured (\(apps.keys.sorted().joined(separator: ", ")))")
        }

        // Section by section, in the order the docs describe a job (docs/jobs.md).
        let audience = try decodeAudience(fields.object("audience"), chunk: chunk)
        var delivery = try decodeHeaders(&fields)
        let liveActivity = try fields.object("live_activity").map { object throws(JobError) in try LiveActivity(object, enqueuedAt: enqueuedAt) }
        let tokenNamespace = try Self.tokenNamespace(liveActivity?.event, audience: audience, chunkField: chunk ? fields.string("token_namespace") : nil)
        try Self.applyLiveActivityRules(liveActivity, audience: audience, to: &delivery)
        try decodeRouting(&fields, object, into: &delivery, app: app, appTopic: appTopic, audience: audience, liveActivity: liveActivity, enqueuedAt: enqueuedAt)
        let payload = try decodePayload(&fields, object, body: body, liveActivity: liveActivity, delivery: delivery, app: app, appTopic: appTopic, audience: audience)
        let idempotencyKey = try decodeIdempotencyKey(&fields)
        var job = PushJob(
            id: id, app: app, audience: audience, type: try fields.string("type"), subtype: try fields.string("subtype"),
            payload: payload.bytes, pushType: payload.pushType, priority: delivery.priority, expiration: delivery.expiration,
            collapseID: delivery.collapseID, topic: delivery.topic, results: delivery.results, replyTo: delivery.replyTo, badge: payload.badge)
        job.liveActivity = liveActivity?.event
        job.androidOnlyPayload = payload.androidOnly
        job.tokenNamespace = tokenNamespace
        job.idempotencyKey = idempotencyKey
        try decodeTiming(&fields, object, into: &job)
        job.fcm = try Self.decodeFCM(object, audience: audience, job: job)
        return job
    }

    /// What a refused body still says about itself, so its error summary names the job the
    /// producer published (`id`, `app`) and reaches the queue it reads (`reply_to`); each nil when
    /// the body is not an object, or the field is absent, empty or not a string.
    public struct Names: Sendable, Equatable {
        public var id: String?
        public var app: String?
        public var replyTo: String?

        public init(id: String? = nil, app: String? = nil, replyTo: String? = nil) {
            self.id = id
            self.app = app
            self.replyTo = replyTo
        }
    }

    /// The names a refused body gives itself (one parse for all three).
    public static func names(in body: [UInt8]) -> Names {
        guard let object = (try? JSONDocument.parse(body)) as? [String: Any] else { return Names() }
        func text(_ key: String) -> String? {
            guard let value = object[key] as? String, !value.isEmpty else { return nil }
            return value
        }
        return Names(id: text("id"), app: text("app"), replyTo: text("reply_to"))
    }

}
