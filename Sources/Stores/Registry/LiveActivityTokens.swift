/// Where the registry keeps a token of an app. Live Activity tokens (iOS 17.2+) are registry
/// devices under an app key of their own, `<app>#push-to-start` and `<app>#activity:<id>`, so the
/// rules devices already follow (a user tie, invalid marking, removal on a 410 unless registered
/// again since, preferences, groups, `show user`) hold for them without tables of their own. App
/// names cannot contain `#` (the configuration and every command refuse it), so a key reads back
/// unambiguously.
public enum TokenNamespace: Sendable, Hashable, CustomStringConvertible {
    /// Ordinary device tokens: the registry app is the app's name.
    case devices
    /// One token per device and app; a job with event `start` sent to it starts a Live Activity.
    case pushToStart
    /// The tokens of one started Live Activity, which its updates and its end go to.
    case activity(String)

    /// The separator between an app's name and its namespace in a registry app key.
    public static let separator: Character = "#"
    /// An activity id's longest form, in bytes: ids are the app's own (a UUID, an order number).
    public static let maximumActivityIDLength = 128

    /// The registry app key of `app`'s tokens in this namespace.
    public func registryApp(_ app: String) -> String {
        switch self {
        case .devices: app
        case .pushToStart: "\(app)#push-to-start"
        case .activity(let id): "\(app)#activity:\(id)"
        }
    }

    /// The app's name and namespace back from a registry app key (for show user, feedback logs).
    /// A key with no `#`, or a suffix this build does not know, is an ordinary app.
    public static func parse(_ registryApp: String) -> (app: String, namespace: TokenNamespace) {
        // The first `#` ends the app's name: app names have none, activity ids may.
        guard let mark = registryApp.firstIndex(of: separator) else { return (registryApp, .devices) }
        let app = String(registryApp[..<mark])
        let suffix = registryApp[registryApp.index(after: mark)...]
        if suffix == "push-to-start" { return (app, .pushToStart) }
        if suffix.hasPrefix("activity:") {
            let id = String(suffix.dropFirst("activity:".count))
            if !id.isEmpty { return (app, .activity(id)) }
        }
        return (registryApp, .devices)
    }

    /// The app whose users' per-app preferences filter the tokens of `registryApp`: for a Live
    /// Activity namespace, its base app (a user sets preferences for the app, not per activity).
    public static func preferencesApp(_ registryApp: String) -> String {
        parse(registryApp).app
    }

    /// As operators read it: `device`, `push-to-start`, `activity <id>`.
    public var description: String {
        switch self {
        case .devices: "device"
        case .pushToStart: "push-to-start"
        case .activity(let id): "activity \(id)"
        }
    }
}
