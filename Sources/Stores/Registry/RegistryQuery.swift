import Foundation

/// A question a backend asks over `push.registry`, as it sends every command: answered on the
/// message's `reply_to`, changing nothing (so never dead-lettered for the store's sake, and
/// harmless to repeat).
public enum RegistryQuery: Sendable, Hashable {
    /// Whether a device is registered, whose it is, its user's groups, and whether a notification
    /// type reaches it: what `pushworker registry status` prints.
    case status(app: String, token: String, type: String?, subtype: String?)
    /// The whitelist and blacklist kept at one scope: a user's (for every app, or with `app` for
    /// one), or a device's with no user (`app` and `token`).
    case getPreferences(PreferenceScope)
    /// What the delivery ledger holds for a job, a user, a device (`app` and `token`) or an
    /// idempotency key, newest first, a page at a time: answered from the ledger, not the registry.
    case getDeliveries(DeliveryQuery)

    public var name: String {
        switch self {
        case .status: "status"
        case .getPreferences: "get_preferences"
        case .getDeliveries: "get_deliveries"
        }
    }

    static let fields: [String: Set<String>] = [
        "status": ["app", "token", "type", "subtype"],
        "get_preferences": ["user", "app", "token"],
        "get_deliveries": ["job", "user", "app", "token", "idempotency_key", "since", "until", "limit", "after"],
    ]

    init(_ object: [String: Any], name: String) throws(StoreError) {
        let reader = RegistryFields(object)
        try reader.allow(Self.fields[name] ?? [], in: name)
        if name == "get_preferences" {
            self = .getPreferences(try reader.scope())
            return
        }
        if name == "get_deliveries" {
            self = try Self.deliveries(reader)
            return
        }
        let type = try reader.optionalString("type")
        let subtype = try reader.optionalString("subtype")
        if subtype != nil && type == nil {
            throw StoreError(.invalidField, field: "subtype", "subtype needs a type: preferences are kept per type")
        }
        self = .status(app: try reader.app(), token: try reader.token(), type: type, subtype: subtype)
    }

    /// `get_deliveries`: exactly one of `job`, `user`, `token` (with its `app`) or
    /// `idempotency_key`; `since` and `until` as RFC 3339 or Unix seconds; `limit` 1–10000
    /// (default 100); `after`: the `next` of the page before.
    private static func deliveries(_ reader: RegistryFields) throws(StoreError) -> RegistryQuery {
        let job = try reader.optionalString("job"), user = try reader.optionalString("user")
        let token = reader.object["token"] == nil ? nil : try reader.token()
        let key = try reader.optionalString("idempotency_key")
        guard [job as Any?, user, token, key].compactMap({ $0 }).count == 1 else {
            throw StoreError(.invalidField, field: "job", "get_deliveries names exactly one of job, user, token and idempotency_key")
        }
        let app = token == nil ? try reader.optionalApp() : try reader.app()
        func time(_ key: String) throws(StoreError) -> Int64? {
            guard let value = reader.object[key], !JSONValue.isNull(value) else { return nil }
            guard let milliseconds = RFC3339.milliseconds(json: value) else {
                throw StoreError(.invalidField, field: key, "\(key) must be an RFC 3339 time (2026-11-24T09:00:00Z) or Unix seconds")
            }
            return milliseconds
        }
        var after: DeliveryCursor?
        if let value = reader.object["after"], !JSONValue.isNull(value) {
            guard let text = value as? String, let cursor = DeliveryCursor(text) else {
                throw StoreError(.invalidField, field: "after", "after must be the next of an earlier get_deliveries answer, as it was given")
            }
            after = cursor
        }
        var limit = 100
        if let value = reader.object["limit"], !JSONValue.isNull(value) {
            guard let number = value as? Int, (1...DeliveryQuery.maximumLimit).contains(number) else {
                throw StoreError(.invalidField, field: "limit", "limit must be a whole number from 1 to \(DeliveryQuery.maximumLimit)")
            }
            limit = number
        }
        let subject: DeliveryQuery.Subject =
            if let job { .job(job) } else if let user { .user(user) } else if let key { .idempotencyKey(key) } else { .token(token ?? "") }
        return .getDeliveries(DeliveryQuery(subject, app: app, since: try time("since"), until: try time("until"), limit: limit, after: after))
    }

    /// Runs the query; the answer is the reply's JSON object (besides `"ok": true`).
    public func answer(from store: any RegistryStore) async throws(StoreError) -> [String: Any] {
        switch self {
        case .status(let app, let token, let type, let subtype):
            return ["status": try await store.status(app: app, token: token, type: type, subtype: subtype).json]
        case .getPreferences(let scope):
            let preferences = try await store.preferences(scope) ?? .none
            let timing = try await store.timing(scope)
            var answer: [String: Any] = ["scope": scope.name, "whitelist": preferences.whitelist, "blacklist": preferences.blacklist]
            // Quiet hours are a user's (for every app, or one); a time zone a user's or a device's.
            if case .device = scope {} else { answer["quiet_hours"] = timing.quietHours?.json ?? NSNull() }
            if case .userApp = scope {} else { answer["time_zone"] = timing.zone ?? NSNull() }
            return ["preferences": answer]
        case .getDeliveries:
            throw StoreError(.unknownCommand, field: "command", "get_deliveries is answered from the delivery ledger, which this worker keeps none of")
        }
    }
}

/// What arrives on `push.registry`: a command that changes the registry, or a query.
public enum RegistryRequest: Sendable, Hashable {
    case command(RegistryCommand)
    case query(RegistryQuery)
    /// A broadcast channel, on APNs.
    case channel(ChannelRequest)
    /// `cancel_job`: a job held until its `send_at` is never released. Answered, whatever it
    /// found (a job unknown or released already is an answer, not a bad command).
    case cancelJob(HeldJobName)

    public var name: String {
        switch self {
        case .command(let command): command.name
        case .query(let query): query.name
        case .channel(let request): request.name
        case .cancelJob: "cancel_job"
        }
    }

    static let cancelFields: Set<String> = ["app", "job", "idempotency_key"]

    /// Reads a command or a query, or says which field is wrong.
    public init(json body: [UInt8]) throws(StoreError) {
        self = try Self.decode(json: body).request
    }

    /// The request, and the user's token it carries in `auth`.
    public static func decode(json body: [UInt8]) throws(StoreError) -> (request: RegistryRequest, auth: String?) {
        let object = try RegistryFields.object(json: body)
        let auth: String?
        switch object["auth"] {
        case let text as String: auth = text
        case nil, is NSNull: auth = nil
        default: throw StoreError(.invalidField, field: "auth", "auth must be a string: the user's token (a JWT)")
        }
        return (try RegistryRequest(object), auth)
    }

    init(_ object: [String: Any]) throws(StoreError) {
        let name = try RegistryFields(object).string("command")
        if RegistryCommand.fields[name] != nil {
            self = .command(try RegistryCommand(object, name: name))
        } else if RegistryQuery.fields[name] != nil {
            self = .query(try RegistryQuery(object, name: name))
        } else if ChannelRequest.fields[name] != nil {
            self = .channel(try ChannelRequest(object, name: name))
        } else if name == "cancel_job" {
            let reader = RegistryFields(object)
            try reader.allow(Self.cancelFields, in: name)
            let job = try reader.optionalString("job"), key = try reader.optionalString("idempotency_key")
            let app = try reader.optionalString("app")
            switch (job, key) {
            case (let job?, nil): self = .cancelJob(HeldJobName(.job(job), app: app))
            case (nil, let key?): self = .cancelJob(HeldJobName(.idempotencyKey(key), app: app))
            default: throw StoreError(.invalidField, field: "job", "cancel_job names exactly one of job (a job id) and idempotency_key")
            }
        } else {
            let known = (Array(RegistryCommand.fields.keys) + Array(RegistryQuery.fields.keys) + Array(ChannelRequest.fields.keys) + ["cancel_job"]).sorted()
            throw StoreError(.unknownCommand, field: "command", "command '\(name)' is not one of \(known.joined(separator: ", "))")
        }
    }
}
