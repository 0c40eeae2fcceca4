import APNs
import Foundation

/// A change to the registry, as producers send it on `push.registry`: one JSON object whose
/// `"command"` field names it. Every command is idempotent: applying it twice leaves the registry
/// as applying it once.
public enum RegistryCommand: Sendable, Hashable {
    case registerDevice(app: String, token: String, user: String?)
    /// Removes the device; its user stays.
    case unregisterDevice(app: String, token: String)
    /// A device belongs to at most one user: connecting it to another moves it.
    case connect(app: String, token: String, user: String)
    case disconnect(app: String, token: String, user: String)
    case addToGroup(user: String, group: String, createGroup: Bool)
    case removeFromGroup(user: String, group: String)
    case setPreferences(user: String, NotificationPreferences)
    /// Removes the user and their group memberships; their devices stay registered, unconnected.
    case deleteUser(user: String)

    public var name: String {
        switch self {
        case .registerDevice: "register_device"
        case .unregisterDevice: "unregister_device"
        case .connect: "connect"
        case .disconnect: "disconnect"
        case .addToGroup: "add_to_group"
        case .removeFromGroup: "remove_from_group"
        case .setPreferences: "set_preferences"
        case .deleteUser: "delete_user"
        }
    }

    /// Refuses a command that would register a device (`register_device`, `connect`) for an app
    /// not among `served`: no job could ever reach that device.
    public func check(servedApps served: Set<String>) throws(RegistryError) {
        switch self {
        case .registerDevice(let app, _, _), .connect(let app, _, _):
            guard served.contains(app) else {
                throw RegistryError(.unknownApp, field: "app", "app '\(app)' is not one the workers serve (configured: \(served.sorted().joined(separator: ", ")))")
            }
        default:
            return
        }
    }

    static let fields: [String: Set<String>] = [
        "register_device": ["app", "token", "user"], "unregister_device": ["app", "token"],
        "connect": ["app", "token", "user"], "disconnect": ["app", "token", "user"],
        "add_to_group": ["user", "group", "create_group"], "remove_from_group": ["user", "group"],
        "set_preferences": ["user", "whitelist", "blacklist"], "delete_user": ["user"],
    ]

    /// Reads a command, or says which field is wrong.
    public init(json body: [UInt8]) throws(RegistryError) {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw RegistryError(.invalidJSON, "a registry command must be one JSON object, such as {\"command\": \"register_device\", \"app\": \"news\", \"token\": \"…\"}")
        }
        let reader = Fields(object)
        let name = try reader.string("command")
        guard let allowed = Self.fields[name] else {
            throw RegistryError(.unknownCommand, field: "command",
                "command '\(name)' is not one of \(Self.fields.keys.sorted().joined(separator: ", "))")
        }
        if let unknown = object.keys.filter({ $0 != "command" && !allowed.contains($0) }).sorted().first {
            throw RegistryError(.invalidField, field: unknown, "\(unknown) is not a field of \(name) (expected \(allowed.sorted().joined(separator: ", ")))")
        }
        switch name {
        case "register_device":
            self = .registerDevice(app: try reader.string("app"), token: try reader.token(), user: try reader.optionalString("user"))
        case "unregister_device":
            self = .unregisterDevice(app: try reader.string("app"), token: try reader.token())
        case "connect":
            self = .connect(app: try reader.string("app"), token: try reader.token(), user: try reader.string("user"))
        case "disconnect":
            self = .disconnect(app: try reader.string("app"), token: try reader.token(), user: try reader.string("user"))
        case "add_to_group":
            self = .addToGroup(user: try reader.string("user"), group: try reader.string("group"), createGroup: try reader.bool("create_group") ?? true)
        case "remove_from_group":
            self = .removeFromGroup(user: try reader.string("user"), group: try reader.string("group"))
        case "set_preferences":
            self = .setPreferences(
                user: try reader.string("user"),
                NotificationPreferences(whitelist: try reader.exceptions("whitelist"), blacklist: try reader.exceptions("blacklist")))
        default:
            self = .deleteUser(user: try reader.string("user"))
        }
    }

    /// Typed fields with errors that name them.
    private struct Fields {
        let object: [String: Any]
        init(_ object: [String: Any]) { self.object = object }

        func optionalString(_ key: String) throws(RegistryError) -> String? {
            guard let value = object[key], !(value is NSNull) else { return nil }
            guard let text = value as? String else { throw RegistryError(.invalidField, field: key, "\(key) must be a string") }
            guard !text.isEmpty else { throw RegistryError(.invalidField, field: key, "\(key) is empty") }
            guard text.utf8.count <= 256 else { throw RegistryError(.invalidField, field: key, "\(key) is \(text.utf8.count) bytes; at most 256") }
            // PostgreSQL cannot store it, and no name needs it.
            guard !text.utf8.contains(0) else { throw RegistryError(.invalidField, field: key, "\(key) contains a NUL character") }
            return text
        }

        func string(_ key: String) throws(RegistryError) -> String {
            guard let text = try optionalString(key) else { throw RegistryError(.missingField, field: key, "\(key) is missing") }
            return text
        }

        /// A device token, normalised and checked as the job decoder does (`<3F1C 0E5D …>` as apps
        /// log it is the token `3f1c0e5d…`).
        func token() throws(RegistryError) -> String {
            let token = APNsDeviceToken.normalized(try string("token"))
            do { try APNsDeviceToken.validate(token, field: "token") } catch {
                throw RegistryError(.invalidField, field: "token", "token: \(error.message)")
            }
            return token
        }

        func bool(_ key: String) throws(RegistryError) -> Bool? {
            guard let value = object[key], !(value is NSNull) else { return nil }
            guard let number = value as? NSNumber, String(cString: number.objCType) == "c" else {
                throw RegistryError(.invalidField, field: key, "\(key) must be true or false")
            }
            return number.boolValue
        }

        /// `{"type": ["subtype", …]}`; absent means empty.
        func exceptions(_ key: String) throws(RegistryError) -> [String: [String]] {
            guard let value = object[key], !(value is NSNull) else { return [:] }
            guard let map = value as? [String: Any] else {
                throw RegistryError(.invalidField, field: key, "\(key) must map types to lists of exception subtypes, such as {\"grades\": [\"final-grade\"]}")
            }
            var result: [String: [String]] = [:]
            for (type, list) in map {
                guard let subtypes = list as? [Any], subtypes.allSatisfy({ $0 is String }) else {
                    throw RegistryError(.invalidField, field: "\(key).\(type)", "\(key).\(type) must be a list of subtype strings")
                }
                result[type] = subtypes.compactMap { $0 as? String }
            }
            return result
        }
    }
}
