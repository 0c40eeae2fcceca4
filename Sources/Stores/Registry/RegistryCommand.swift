import APNs
import Foundation

/// A change to the registry, as producers send it on `push.registry`: one JSON object whose
/// `"command"` field names it. Every command is idempotent: applying it twice leaves the registry
/// as applying it once.
public enum RegistryCommand: Sendable, Hashable {
    /// `platform`: the service the token is of (APNs' hex, or FCM's registration token).
    case registerDevice(app: String, token: String, user: String?, platform: DevicePlatform = .apns)
    /// Removes the device; its user stays.
    case unregisterDevice(app: String, token: String)
    /// A device belongs to at most one user: connecting it to another moves it.
    case connect(app: String, token: String, user: String)
    case disconnect(app: String, token: String, user: String)
    case addToGroup(user: String, group: String, createGroup: Bool)
    case removeFromGroup(user: String, group: String)
    /// Replaces the preferences of a user (for every app, or for one), or of a device with no user.
    case setPreferences(PreferenceScope, NotificationPreferences)
    /// Adds one type to a list, or takes it out; the rest of the set stays.
    case editPreferences(PreferenceScope, PreferenceEdit)
    /// Removes the user and their group memberships; their devices stay registered, unconnected.
    case deleteUser(user: String)
    /// The app's token changed (a restore, a reinstall): `new` takes `old`'s user, and `old` is
    /// removed. With `old` gone already, `new` is registered as it is.
    case replaceToken(app: String, old: String, new: String)
    /// The app was opened: the badge counter of one device (`app`, `token`), or of all a user's
    /// devices (of `app` only, when named), goes back to 0.
    case resetBadge(BadgeTarget)
    /// A Live Activity token (`register_push_to_start_token`, `register_activity_token`): a device
    /// of `namespace.registryApp(app)`, registered as `registerDevice` registers one.
    case registerLiveActivityToken(app: String, namespace: TokenNamespace, token: String, user: String?)
    /// Removes a Live Activity token, as `unregisterDevice` removes a device.
    case unregisterLiveActivityToken(app: String, namespace: TokenNamespace, token: String)
    /// The activity is over: every token registered for it is removed, useless from now on.
    case endActivity(app: String, activity: String)
    /// A user's IANA time zone (`.user`), or a device's (`.device`), which goes before its
    /// user's; nil clears it. Quiet hours without a zone of their own are counted in it.
    case setTimeZone(PreferenceScope, zone: String?)
    /// A user's quiet hours, for every app or (`.userApp`) for one, where they replace the
    /// app-wide ones; nil clears them.
    case setQuietHours(PreferenceScope, QuietHours?)

    public var name: String {
        switch self {
        case .registerDevice: "register_device"
        case .unregisterDevice: "unregister_device"
        case .connect: "connect"
        case .disconnect: "disconnect"
        case .addToGroup: "add_to_group"
        case .removeFromGroup: "remove_from_group"
        case .setPreferences: "set_preferences"
        case .editPreferences(_, let edit): edit.commandName
        case .deleteUser: "delete_user"
        case .replaceToken: "replace_token"
        case .resetBadge: "reset_badge"
        case .registerLiveActivityToken(_, .devices, _, _): "register_device"
        case .registerLiveActivityToken(_, .pushToStart, _, _): "register_push_to_start_token"
        case .registerLiveActivityToken(_, .activity, _, _): "register_activity_token"
        case .unregisterLiveActivityToken(_, .devices, _): "unregister_device"
        case .unregisterLiveActivityToken(_, .pushToStart, _): "unregister_push_to_start_token"
        case .unregisterLiveActivityToken(_, .activity, _): "unregister_activity_token"
        case .endActivity: "end_activity"
        case .setTimeZone: "set_time_zone"
        case .setQuietHours: "set_quiet_hours"
        }
    }

    /// Refuses a command that would register a device (`register_device`, `connect`, a Live
    /// Activity token for the app) for an app not among `served`: no job could ever reach that device.
    public func check(servedApps served: Set<String>) throws(StoreError) {
        switch self {
        case .registerDevice(let app, _, _, _), .connect(let app, _, _), .replaceToken(let app, _, _),
            .registerLiveActivityToken(let app, _, _, _):
            guard served.contains(app) else {
                throw StoreError(.unknownApp, field: "app", "app '\(app)' is not one the workers serve (configured: \(served.sorted().joined(separator: ", ")))")
            }
        default:
            return
        }
    }

    static let fields: [String: Set<String>] = [
        "register_device": ["app", "token", "user", "platform"], "unregister_device": ["app", "token"],
        "connect": ["app", "token", "user"], "disconnect": ["app", "token", "user"],
        "add_to_group": ["user", "group", "create_group"], "remove_from_group": ["user", "group"],
        "set_preferences": ["user", "app", "token", "whitelist", "blacklist"], "delete_user": ["user"],
        "add_to_whitelist": ["user", "app", "token", "type", "exceptions", "entry"],
        "add_to_blacklist": ["user", "app", "token", "type", "exceptions", "entry"],
        "remove_from_whitelist": ["user", "app", "token", "type"], "remove_from_blacklist": ["user", "app", "token", "type"],
        "replace_token": ["app", "old", "new"], "reset_badge": ["app", "token", "user"],
        "register_push_to_start_token": ["app", "token", "user"], "unregister_push_to_start_token": ["app", "token"],
        "register_activity_token": ["app", "activity", "token", "user"], "unregister_activity_token": ["app", "activity", "token"],
        "end_activity": ["app", "activity"],
        "set_time_zone": ["user", "app", "token", "zone"], "set_quiet_hours": ["user", "app", "quiet_hours"],
    ]

    /// Reads a command, or says which field is wrong.
    public init(json body: [UInt8]) throws(StoreError) {
        let object = try RegistryFields.object(json: body)
        let name = try RegistryFields(object).string("command")
        guard Self.fields[name] != nil else {
            throw StoreError(.unknownCommand, field: "command",
                "command '\(name)' is not one of \(Self.fields.keys.sorted().joined(separator: ", "))")
        }
        try self.init(object, name: name)
    }

    /// A command `name` (one of `fields`) from its JSON object.
    init(_ object: [String: Any], name: String) throws(StoreError) {
        let reader = RegistryFields(object)
        try reader.allow(Self.fields[name] ?? [], in: name)
        switch name {
        case "register_device":
            let (token, platform) = try reader.deviceToken()
            self = .registerDevice(app: try reader.app(), token: token, user: try reader.optionalString("user"), platform: platform)
        case "unregister_device":
            self = .unregisterDevice(app: try reader.app(), token: try reader.token())
        case "connect":
            self = .connect(app: try reader.app(), token: try reader.token(), user: try reader.string("user"))
        case "disconnect":
            self = .disconnect(app: try reader.app(), token: try reader.token(), user: try reader.string("user"))
        case "add_to_group":
            self = .addToGroup(user: try reader.string("user"), group: try reader.string("group"), createGroup: try reader.bool("create_group") ?? true)
        case "remove_from_group":
            self = .removeFromGroup(user: try reader.string("user"), group: try reader.string("group"))
        case "set_preferences":
            self = .setPreferences(
                try reader.scope(),
                NotificationPreferences(whitelist: try reader.exceptions("whitelist"), blacklist: try reader.exceptions("blacklist")))
        case "add_to_whitelist", "add_to_blacklist":
            let list: PreferenceList = name == "add_to_whitelist" ? .whitelist : .blacklist
            let scope = try reader.scope()
            let (type, exceptions) = try reader.entry()
            self = .editPreferences(scope, .add(list, type: type, exceptions: exceptions))
        case "remove_from_whitelist", "remove_from_blacklist":
            let list: PreferenceList = name == "remove_from_whitelist" ? .whitelist : .blacklist
            self = .editPreferences(try reader.scope(), .remove(list, type: try reader.string("type")))
        case "reset_badge":
            switch try reader.scope() {
            case .device(let app, let token): self = .resetBadge(.device(app: app, token: token))
            case .user(let user): self = .resetBadge(.user(user, app: nil))
            case .userApp(let user, let app): self = .resetBadge(.user(user, app: app))
            }
        case "replace_token":
            self = .replaceToken(app: try reader.app(), old: try reader.token("old"), new: try reader.token("new"))
        case "set_time_zone":
            let scope = try reader.scope()
            if case .userApp = scope {
                throw StoreError(.invalidField, field: "app", "a time zone is a user's (user) or a device's (app and token), not a user's for one app")
            }
            var zone: String?
            switch object["zone"] {
            case nil: throw StoreError(.missingField, field: "zone", "zone is missing: an IANA time zone name such as Europe/Berlin, or null to clear it")
            case let name as String: zone = try TimeZones.checked(name, field: "zone")
            case is NSNull: zone = nil
            default: throw StoreError(.invalidField, field: "zone", "zone must be an IANA time zone name such as Europe/Berlin, or null")
            }
            self = .setTimeZone(scope, zone: zone)
        case "set_quiet_hours":
            let user = try reader.string("user")
            let app = try reader.optionalApp()
            let scope: PreferenceScope = app.map { .userApp(user, app: $0) } ?? .user(user)
            switch object["quiet_hours"] {
            case nil: throw StoreError(.missingField, field: "quiet_hours", "quiet_hours is missing: {\"from\": \"22:00\", \"to\": \"07:00\"}, or null to clear them")
            case is NSNull: self = .setQuietHours(scope, nil)
            case let window?: self = .setQuietHours(scope, try QuietHours(json: window, field: "quiet_hours"))
            }
        case "register_push_to_start_token":
            self = .registerLiveActivityToken(app: try reader.app(), namespace: .pushToStart, token: try reader.apnsToken(), user: try reader.optionalString("user"))
        case "unregister_push_to_start_token":
            self = .unregisterLiveActivityToken(app: try reader.app(), namespace: .pushToStart, token: try reader.apnsToken())
        case "register_activity_token":
            let app = try reader.app(), activity = try reader.activity()
            self = .registerLiveActivityToken(app: app, namespace: .activity(activity), token: try reader.apnsToken(), user: try reader.optionalString("user"))
        case "unregister_activity_token":
            let app = try reader.app(), activity = try reader.activity()
            self = .unregisterLiveActivityToken(app: app, namespace: .activity(activity), token: try reader.apnsToken())
        case "end_activity":
            self = .endActivity(app: try reader.app(), activity: try reader.activity())
        default:
            self = .deleteUser(user: try reader.string("user"))
        }
    }
}

/// Whose badge counters `reset_badge` clears.
public enum BadgeTarget: Sendable, Hashable {
    case device(app: String, token: String)
    /// Every device of the user, or those of one app.
    case user(String, app: String?)
}
