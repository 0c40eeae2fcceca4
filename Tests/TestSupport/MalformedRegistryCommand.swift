/// Registry commands that must be refused, each with its error code and the field it names: the
/// command parser's table test and the end-to-end test through the broker share them.
public struct MalformedRegistryCommand: Sendable, CustomStringConvertible {
    public let json: String
    public let code: String
    public let field: String?
    public var description: String { json }

    static let token = String(repeating: "ab", count: 32)

    public static let corpus: [MalformedRegistryCommand] = [
        MalformedRegistryCommand(json: #"{"command": "add_to_group", "user": "a\u0000b", "group": "g"}"#, code: "invalid_field", field: "user"),
        MalformedRegistryCommand(json: "not json", code: "invalid_json", field: nil),
        MalformedRegistryCommand(json: "[]", code: "invalid_json", field: nil),
        MalformedRegistryCommand(json: #""register_device""#, code: "invalid_json", field: nil),
        MalformedRegistryCommand(json: "{}", code: "missing_field", field: "command"),
        MalformedRegistryCommand(json: #"{"command": "create_channel", "app": "demo", "message_storage_policy": 3}"#, code: "invalid_field", field: "message_storage_policy"),
        MalformedRegistryCommand(json: #"{"command": "show_channel", "app": "demo"}"#, code: "missing_field", field: "channel"),
        MalformedRegistryCommand(json: #"{"command": "list_channels", "app": "demo", "channel": "x"}"#, code: "invalid_field", field: "channel"),
        MalformedRegistryCommand(json: #"{"command": 5}"#, code: "invalid_field", field: "command"),
        MalformedRegistryCommand(json: #"{"command": ""}"#, code: "invalid_field", field: "command"),
        MalformedRegistryCommand(json: #"{"command": "register"}"#, code: "unknown_command", field: "command"),
        MalformedRegistryCommand(json: #"{"command": "register_device", "token": "\#(token)"}"#, code: "missing_field", field: "app"),
        MalformedRegistryCommand(json: #"{"command": "register_device", "app": "news"}"#, code: "missing_field", field: "token"),
        MalformedRegistryCommand(json: #"{"command": "register_device", "app": "news", "token": "xyz"}"#, code: "invalid_field", field: "token"),
        MalformedRegistryCommand(json: #"{"command": "register_device", "app": "news", "token": "abc"}"#, code: "invalid_field", field: "token"),
        MalformedRegistryCommand(json: #"{"command": "register_device", "app": "news", "token": 12}"#, code: "invalid_field", field: "token"),
        MalformedRegistryCommand(json: #"{"command": "register_device", "app": 1, "token": "\#(token)"}"#, code: "invalid_field", field: "app"),
        MalformedRegistryCommand(json: #"{"command": "register_device", "app": "news", "token": "\#(token)", "user": ["u"]}"#, code: "invalid_field", field: "user"),
        MalformedRegistryCommand(json: #"{"command": "register_device", "app": "news", "token": "\#(token)", "usr": "u"}"#, code: "invalid_field", field: "usr"),
        MalformedRegistryCommand(json: #"{"command": "connect", "app": "news", "token": "\#(token)"}"#, code: "missing_field", field: "user"),
        MalformedRegistryCommand(json: #"{"command": "disconnect", "app": "news", "token": "\#(token)", "user": ""}"#, code: "invalid_field", field: "user"),
        MalformedRegistryCommand(json: #"{"command": "add_to_group", "user": "u"}"#, code: "missing_field", field: "group"),
        MalformedRegistryCommand(json: #"{"command": "add_to_group", "user": "u", "group": "g", "create_group": "yes"}"#, code: "invalid_field", field: "create_group"),
        MalformedRegistryCommand(json: #"{"command": "add_to_group", "user": "u", "group": "g", "create_group": 1}"#, code: "invalid_field", field: "create_group"),
        MalformedRegistryCommand(json: #"{"command": "remove_from_group", "group": "g"}"#, code: "missing_field", field: "user"),
        MalformedRegistryCommand(json: #"{"command": "set_preferences", "user": "u", "whitelist": ["grades"]}"#, code: "invalid_field", field: "whitelist"),
        MalformedRegistryCommand(json: #"{"command": "set_preferences", "user": "u", "blacklist": {"grades": "final-grade"}}"#, code: "invalid_field", field: "blacklist.grades"),
        MalformedRegistryCommand(json: #"{"command": "set_preferences", "user": "u", "blacklist": {"grades": [1]}}"#, code: "invalid_field", field: "blacklist.grades"),
        MalformedRegistryCommand(json: #"{"command": "delete_user"}"#, code: "missing_field", field: "user"),
        MalformedRegistryCommand(json: #"{"command": "delete_user", "user": "\#(String(repeating: "u", count: 300))"}"#, code: "invalid_field", field: "user"),
        MalformedRegistryCommand(json: #"{"command": "replace_token", "app": "news", "old": "\#(token)"}"#, code: "missing_field", field: "new"),
        MalformedRegistryCommand(json: #"{"command": "replace_token", "app": "news", "old": "xyz", "new": "\#(token)"}"#, code: "invalid_field", field: "old"),
        MalformedRegistryCommand(json: #"{"command": "replace_token", "app": "news", "token": "\#(token)", "new": "\#(token)"}"#, code: "invalid_field", field: "token"),
        MalformedRegistryCommand(json: #"{"command": "add_to_whitelist", "user": "u", "entry": ["grades"], "type": "grades"}"#, code: "invalid_field", field: "entry"),
        MalformedRegistryCommand(json: #"{"command": "add_to_whitelist", "user": "u", "entry": []}"#, code: "invalid_field", field: "entry"),
        MalformedRegistryCommand(json: #"{"command": "add_to_blacklist", "user": "u", "entry": ["grades", 3]}"#, code: "invalid_field", field: "entry"),
        MalformedRegistryCommand(json: #"{"command": "add_to_blacklist", "user": "u"}"#, code: "missing_field", field: "type"),
        MalformedRegistryCommand(json: #"{"command": "add_to_blacklist", "user": "u", "type": "grades", "exceptions": "final"}"#, code: "invalid_field", field: "exceptions"),
        MalformedRegistryCommand(json: #"{"command": "remove_from_whitelist", "type": "grades"}"#, code: "missing_field", field: "user"),
        MalformedRegistryCommand(json: #"{"command": "set_preferences", "token": "\#(token)", "blacklist": {}}"#, code: "missing_field", field: "app"),
        MalformedRegistryCommand(json: #"{"command": "set_preferences", "user": "u", "app": "news", "token": "\#(token)"}"#, code: "invalid_field", field: "token"),
        MalformedRegistryCommand(json: #"{"command": "get_preferences", "app": "news"}"#, code: "missing_field", field: "user"),
        MalformedRegistryCommand(json: #"{"command": "reset_badge", "token": "\#(token)"}"#, code: "missing_field", field: "app"),
        MalformedRegistryCommand(json: #"{"command": "reset_badge", "user": "u", "badge": 0}"#, code: "invalid_field", field: "badge"),
        MalformedRegistryCommand(json: #"{"command": "status", "app": "news"}"#, code: "missing_field", field: "token"),
        MalformedRegistryCommand(json: #"{"command": "status", "app": "news", "token": "\#(token)", "subtype": "final"}"#, code: "invalid_field", field: "subtype"),
        MalformedRegistryCommand(json: #"{"command": "status", "app": "news", "token": "\#(token)", "user": "u"}"#, code: "invalid_field", field: "user"),
        // Live Activity tokens: an activity id is non-empty, at most 128 bytes; `#` marks a namespace, never an app's name.
        MalformedRegistryCommand(json: #"{"command": "register_activity_token", "app": "news", "token": "\#(token)"}"#, code: "missing_field", field: "activity"),
        MalformedRegistryCommand(json: #"{"command": "register_activity_token", "app": "news", "activity": "", "token": "\#(token)"}"#, code: "invalid_field", field: "activity"),
        MalformedRegistryCommand(json: #"{"command": "register_activity_token", "app": "news", "activity": 7, "token": "\#(token)"}"#, code: "invalid_field", field: "activity"),
        MalformedRegistryCommand(json: #"{"command": "unregister_activity_token", "app": "news", "activity": "\#(String(repeating: "a", count: 129))", "token": "\#(token)"}"#, code: "invalid_field", field: "activity"),
        MalformedRegistryCommand(json: #"{"command": "end_activity", "app": "news"}"#, code: "missing_field", field: "activity"),
        MalformedRegistryCommand(json: #"{"command": "end_activity", "app": "news", "activity": "A", "token": "\#(token)"}"#, code: "invalid_field", field: "token"),
        MalformedRegistryCommand(json: #"{"command": "register_push_to_start_token", "app": "news", "token": "xyz"}"#, code: "invalid_field", field: "token"),
        MalformedRegistryCommand(json: #"{"command": "register_push_to_start_token", "app": "news", "activity": "A", "token": "\#(token)"}"#, code: "invalid_field", field: "activity"),
        MalformedRegistryCommand(json: #"{"command": "unregister_push_to_start_token", "token": "\#(token)"}"#, code: "missing_field", field: "app"),
        MalformedRegistryCommand(json: #"{"command": "register_push_to_start_token", "app": "news#push-to-start", "token": "\#(token)"}"#, code: "invalid_field", field: "app"),
        MalformedRegistryCommand(json: #"{"command": "unregister_device", "app": "news#activity:A", "token": "\#(token)"}"#, code: "invalid_field", field: "app"),
        // get_deliveries: one subject; a cursor as it was given; a time, not a boolean.
        MalformedRegistryCommand(json: #"{"command": "get_deliveries", "idempotency_key": "order-1", "job": "j-1"}"#, code: "invalid_field", field: "job"),
        MalformedRegistryCommand(json: #"{"command": "get_deliveries", "job": "j-1", "after": "not a cursor!"}"#, code: "invalid_field", field: "after"),
        MalformedRegistryCommand(json: #"{"command": "get_deliveries", "user": "u-1", "since": true}"#, code: "invalid_field", field: "since"),
    ]
}
