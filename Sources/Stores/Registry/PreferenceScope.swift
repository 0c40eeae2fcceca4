/// Whose preferences a command sets or reads. A device's notifications are filtered by the first
/// that applies: its user's preferences for the device's app, else its user's app-wide ones,
/// else (a device with no user) the device's own.
public enum PreferenceScope: Sendable, Hashable, CustomStringConvertible {
    /// A user's preferences for every app.
    case user(String)
    /// A user's preferences for one app; there they replace the app-wide ones whole.
    case userApp(String, app: String)
    /// A device that has no user (an app used without signing in).
    case device(app: String, token: String)

    /// The answer's `scope`.
    public var name: String {
        switch self {
        case .user: "user"
        case .userApp: "user_app"
        case .device: "device"
        }
    }

    public var description: String {
        switch self {
        case .user(let user): "user \(user)"
        case .userApp(let user, let app): "user \(user) in app \(app)"
        case .device(let app, let token): "device \(app) \(token)"
        }
    }
}

/// One list of a preference set.
public enum PreferenceList: String, Sendable, Hashable, CaseIterable {
    case whitelist, blacklist
}

/// A change to one type's entry, as the registration APIs pushworker replaces make them: add a type
/// (with its exceptions) to a list, or take it out, leaving the rest of the set as it is.
public enum PreferenceEdit: Sendable, Hashable {
    /// Sets the type's entry, replacing the exceptions it had.
    case add(PreferenceList, type: String, exceptions: [String])
    case remove(PreferenceList, type: String)

    /// `add_to_whitelist`, `remove_from_blacklist`, …
    public var commandName: String {
        switch self {
        case .add(let list, _, _): "add_to_\(list.rawValue)"
        case .remove(let list, _): "remove_from_\(list.rawValue)"
        }
    }

    public func applied(to preferences: NotificationPreferences) -> NotificationPreferences {
        var result = preferences
        switch self {
        case .add(.whitelist, let type, let exceptions): result.whitelist[type] = exceptions
        case .add(.blacklist, let type, let exceptions): result.blacklist[type] = exceptions
        case .remove(.whitelist, let type): result.whitelist[type] = nil
        case .remove(.blacklist, let type): result.blacklist[type] = nil
        }
        return result
    }
}
