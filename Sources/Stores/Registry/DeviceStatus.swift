import Foundation

/// A device as the registry sees it, for a backend's `status` query and the operator's
/// `pushworker registry status`: one shape, printed two ways.
public struct DeviceStatus: Sendable, Hashable {
    public var app: String
    public var token: String
    /// Registered and not marked invalid by APNs.
    public var registered: Bool
    public var user: String?
    /// The user's groups, in name order.
    public var groups: [String]
    public var type: String?
    public var subtype: String?
    /// Whether the preferences that apply to the device (its user's, or its own when it has no
    /// user; none: true) let a job of `type` reach it; nil when no type was asked about.
    public var reaches: Bool?
    /// The badge counter jobs with `"badge": "increment"` raise; nil when not registered.
    public var badge: Int?

    public init(
        app: String, token: String, registered: Bool, user: String? = nil, groups: [String] = [], type: String? = nil, subtype: String? = nil,
        reaches: Bool? = nil, badge: Int? = nil
    ) {
        self.badge = badge
        self.app = app
        self.token = token
        self.registered = registered
        self.user = user
        self.groups = groups
        self.type = type
        self.subtype = subtype
        self.reaches = reaches
    }

    /// The `status` object of the reply: every key present, null where there is nothing.
    public var json: [String: Any] {
        [
            "app": app, "token": token, "registered": registered, "user": user ?? NSNull(), "groups": groups,
            "type": type ?? NSNull(), "subtype": subtype ?? NSNull(), "reaches": reaches ?? NSNull(), "badge": badge ?? NSNull(),
        ]
    }

    /// As `pushworker registry status` prints it.
    public var lines: [String] {
        guard registered else { return ["\(app) \(token): not registered (or marked invalid)"] }
        var lines = ["\(app) \(token): registered, user \(user ?? "none")"]
        if user != nil { lines.append("groups: \(groups.isEmpty ? "none" : groups.joined(separator: ", "))") }
        if let badge { lines.append("badge: \(badge)") }
        if let type, let reaches {
            let verdict = reaches ? "reaches it" : "is filtered by \(user.map { "\($0)'s" } ?? "the device's own") preferences"
            lines.append("type \(type)\(subtype.map { "/\($0)" } ?? ""): \(verdict)")
        }
        return lines
    }
}

extension RegistryStore {
    /// The device's status; a `type` is checked against its user's preferences.
    public func status(app: String, token: String, type: String?, subtype: String?) async throws(StoreError) -> DeviceStatus {
        guard let device = try await device(app: app, token: token) else {
            return DeviceStatus(app: app, token: token, registered: false, type: type, subtype: subtype)
        }
        var status = DeviceStatus(app: app, token: device.token, registered: true, user: device.user, type: type, subtype: subtype)
        if let user = device.user { status.groups = try await self.user(user)?.groups ?? [] }
        if let type { status.reaches = (device.preferences ?? .none).allows(type: type, subtype: subtype) }
        status.badge = try await badgeCount(app: app, token: device.token)
        return status
    }
}
