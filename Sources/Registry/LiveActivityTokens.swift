/// Where a token lives in the registry: ordinary device tokens under the app's name, Live Activity
/// tokens in a namespace of the app (a registry app key of their own), so every rule for devices
/// (user tie, 410 removal, preferences, groups) holds for them unchanged.
public enum TokenNamespace: Sendable, Hashable {
    case devices
    case pushToStart
    case activity(String)

    public func registryApp(_ app: String) -> String {
        switch self {
        case .devices: app
        case .pushToStart: app + "#push-to-start"
        case .activity(let id): app + "#activity:" + id
        }
    }

    public static func parse(_ registryApp: String) -> (app: String, namespace: TokenNamespace) {
        guard let mark = registryApp.firstIndex(of: "#") else { return (registryApp, .devices) }
        let app = String(registryApp[..<mark]), rest = registryApp[registryApp.index(after: mark)...]
        if rest == "push-to-start" { return (app, .pushToStart) }
        if rest.hasPrefix("activity:") { return (app, .activity(String(rest.dropFirst("activity:".count)))) }
        return (registryApp, .devices)
    }
}
