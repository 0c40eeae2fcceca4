import Foundation

/// A broadcast-channel request on `push.registry`: carried out on APNs' channel management API by
/// the registry service (with the app's credentials), answered like a query: `{"ok": true,
/// "channel": {…}}` or the refusal. The registry itself keeps nothing of channels: APNs is their
/// one record, so a channel made with `pushworker channels` and one made here are the same.
public enum ChannelRequest: Sendable, Hashable {
    /// `message_storage_policy` 0: APNs keeps no broadcast for devices that subscribe later (a
    /// broadcast must then expire at once); 1 (the default): it keeps the most recent one.
    case create(app: String, storagePolicy: Int)
    case list(app: String)
    case show(app: String, channel: String)
    case delete(app: String, channel: String)

    public var name: String {
        switch self {
        case .create: "create_channel"
        case .list: "list_channels"
        case .show: "show_channel"
        case .delete: "delete_channel"
        }
    }

    public var app: String {
        switch self {
        case .create(let app, _), .list(let app), .show(let app, _), .delete(let app, _): app
        }
    }

    static let fields: [String: Set<String>] = [
        "create_channel": ["app", "message_storage_policy"], "list_channels": ["app"],
        "show_channel": ["app", "channel"], "delete_channel": ["app", "channel"],
    ]

    init(_ object: [String: Any], name: String) throws(StoreError) {
        let reader = RegistryFields(object)
        try reader.allow(Self.fields[name] ?? [], in: name)
        let app = try reader.app()
        switch name {
        case "create_channel":
            var policy = 1
            if let value = object["message_storage_policy"], !JSONValue.isNull(value) {
                guard let number = JSONValue.number(value), !JSONValue.isBoolean(number), [0, 1].contains(number.doubleValue) else {
                    throw StoreError(.invalidField, field: "message_storage_policy",
                        "message_storage_policy must be 0 (no message stored) or 1 (the most recent message stored)")
                }
                policy = number.intValue
            }
            self = .create(app: app, storagePolicy: policy)
        case "list_channels":
            self = .list(app: app)
        case "show_channel":
            self = .show(app: app, channel: try reader.string("channel"))
        default:
            self = .delete(app: app, channel: try reader.string("channel"))
        }
    }
}
