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

    public var name: String {
        switch self {
        case .status: "status"
        case .getPreferences: "get_preferences"
        }
    }

    static let fields: [String: Set<String>] = [
        "status": ["app", "token", "type", "subtype"],
        "get_preferences": ["user", "app", "token"],
    ]

    init(_ object: [String: Any], name: String) throws(RegistryError) {
        let reader = RegistryFields(object)
        try reader.allow(Self.fields[name] ?? [], in: name)
        if name == "get_preferences" {
            self = .getPreferences(try reader.scope())
            return
        }
        let type = try reader.optionalString("type")
        let subtype = try reader.optionalString("subtype")
        if subtype != nil && type == nil {
            throw RegistryError(.invalidField, field: "subtype", "subtype needs a type: preferences are kept per type")
        }
        self = .status(app: try reader.app(), token: try reader.token(), type: type, subtype: subtype)
    }

    /// Runs the query; the answer is the reply's JSON object (besides `"ok": true`).
    public func answer(from store: any RegistryStore) async throws(RegistryError) -> [String: Any] {
        switch self {
        case .status(let app, let token, let type, let subtype):
            return ["status": try await store.status(app: app, token: token, type: type, subtype: subtype).json]
        case .getPreferences(let scope):
            let preferences = try await store.preferences(scope) ?? .none
            return ["preferences": ["scope": scope.name, "whitelist": preferences.whitelist, "blacklist": preferences.blacklist] as [String: Any]]
        }
    }
}

/// What arrives on `push.registry`: a command that changes the registry, or a query.
public enum RegistryRequest: Sendable, Hashable {
    case command(RegistryCommand)
    case query(RegistryQuery)
    /// A broadcast channel, on APNs.
    case channel(ChannelRequest)

    public var name: String {
        switch self {
        case .command(let command): command.name
        case .query(let query): query.name
        case .channel(let request): request.name
        }
    }

    /// Reads a command or a query, or says which field is wrong.
    public init(json body: [UInt8]) throws(RegistryError) {
        self = try Self.decode(json: body).request
    }

    /// The request, and the user's token it carries in `auth`.
    public static func decode(json body: [UInt8]) throws(RegistryError) -> (request: RegistryRequest, auth: String?) {
        let object = try RegistryFields.object(json: body)
        let auth: String?
        switch object["auth"] {
        case nil, is NSNull: auth = nil
        case let text as String: auth = text
        default: throw RegistryError(.invalidField, field: "auth", "auth must be a string: the user's token (a JWT)")
        }
        return (try RegistryRequest(object), auth)
    }

    init(_ object: [String: Any]) throws(RegistryError) {
        let name = try RegistryFields(object).string("command")
        if RegistryCommand.fields[name] != nil {
            self = .command(try RegistryCommand(object, name: name))
        } else if RegistryQuery.fields[name] != nil {
            self = .query(try RegistryQuery(object, name: name))
        } else if ChannelRequest.fields[name] != nil {
            self = .channel(try ChannelRequest(object, name: name))
        } else {
            let known = (Array(RegistryCommand.fields.keys) + Array(RegistryQuery.fields.keys) + Array(ChannelRequest.fields.keys)).sorted()
            throw RegistryError(.unknownCommand, field: "command", "command '\(name)' is not one of \(known.joined(separator: ", "))")
        }
    }
}
