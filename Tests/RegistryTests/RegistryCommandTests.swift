import Registry
import Testing

@Suite("Registry commands")
struct RegistryCommandTests {
    static let token = String(repeating: "ab", count: 32)

    @Test("each command reads from its JSON, tokens lower-cased, create_group true by default")
    func valid() throws {
        func read(_ json: String) throws -> RegistryCommand { try RegistryCommand(json: Array(json.utf8)) }
        let upper = Self.token.uppercased()
        #expect(try read(#"{"command": "register_device", "app": "news", "token": "\#(upper)", "user": "u-1"}"#)
            == .registerDevice(app: "news", token: Self.token, user: "u-1"))
        #expect(try read(#"{"command": "register_device", "app": "news", "token": "\#(Self.token)"}"#)
            == .registerDevice(app: "news", token: Self.token, user: nil))
        #expect(try read(#"{"command": "unregister_device", "app": "news", "token": "\#(Self.token)"}"#) == .unregisterDevice(app: "news", token: Self.token))
        #expect(try read(#"{"command": "connect", "app": "a", "token": "\#(Self.token)", "user": "u"}"#) == .connect(app: "a", token: Self.token, user: "u"))
        #expect(try read(#"{"command": "disconnect", "app": "a", "token": "\#(Self.token)", "user": "u"}"#) == .disconnect(app: "a", token: Self.token, user: "u"))
        #expect(try read(#"{"command": "add_to_group", "user": "u", "group": "g"}"#) == .addToGroup(user: "u", group: "g", createGroup: true))
        #expect(try read(#"{"command": "add_to_group", "user": "u", "group": "g", "create_group": false}"#) == .addToGroup(user: "u", group: "g", createGroup: false))
        #expect(try read(#"{"command": "remove_from_group", "user": "u", "group": "g"}"#) == .removeFromGroup(user: "u", group: "g"))
        #expect(try read(#"{"command": "set_preferences", "user": "u", "whitelist": {"grades": ["final-grade"]}, "blacklist": {}}"#)
            == .setPreferences(user: "u", NotificationPreferences(whitelist: ["grades": ["final-grade"]])))
        #expect(try read(#"{"command": "delete_user", "user": "u"}"#) == .deleteUser(user: "u"))
    }

    struct Malformed: Sendable, CustomStringConvertible {
        let json: String
        let code: RegistryError.Code
        let field: String?
        var description: String { json }
    }

    static let malformed: [Malformed] = [
        Malformed(json: "not json", code: .invalidJSON, field: nil),
        Malformed(json: "[]", code: .invalidJSON, field: nil),
        Malformed(json: #""register_device""#, code: .invalidJSON, field: nil),
        Malformed(json: "{}", code: .missingField, field: "command"),
        Malformed(json: #"{"command": 5}"#, code: .invalidField, field: "command"),
        Malformed(json: #"{"command": ""}"#, code: .invalidField, field: "command"),
        Malformed(json: #"{"command": "register"}"#, code: .unknownCommand, field: "command"),
        Malformed(json: #"{"command": "register_device", "token": "\#(token)"}"#, code: .missingField, field: "app"),
        Malformed(json: #"{"command": "register_device", "app": "news"}"#, code: .missingField, field: "token"),
        Malformed(json: #"{"command": "register_device", "app": "news", "token": "xyz"}"#, code: .invalidField, field: "token"),
        Malformed(json: #"{"command": "register_device", "app": "news", "token": "abc"}"#, code: .invalidField, field: "token"),
        Malformed(json: #"{"command": "register_device", "app": "news", "token": 12}"#, code: .invalidField, field: "token"),
        Malformed(json: #"{"command": "register_device", "app": 1, "token": "\#(token)"}"#, code: .invalidField, field: "app"),
        Malformed(json: #"{"command": "register_device", "app": "news", "token": "\#(token)", "user": ["u"]}"#, code: .invalidField, field: "user"),
        Malformed(json: #"{"command": "register_device", "app": "news", "token": "\#(token)", "usr": "u"}"#, code: .invalidField, field: "usr"),
        Malformed(json: #"{"command": "connect", "app": "news", "token": "\#(token)"}"#, code: .missingField, field: "user"),
        Malformed(json: #"{"command": "disconnect", "app": "news", "token": "\#(token)", "user": ""}"#, code: .invalidField, field: "user"),
        Malformed(json: #"{"command": "add_to_group", "user": "u"}"#, code: .missingField, field: "group"),
        Malformed(json: #"{"command": "add_to_group", "user": "u", "group": "g", "create_group": "yes"}"#, code: .invalidField, field: "create_group"),
        Malformed(json: #"{"command": "add_to_group", "user": "u", "group": "g", "create_group": 1}"#, code: .invalidField, field: "create_group"),
        Malformed(json: #"{"command": "remove_from_group", "group": "g"}"#, code: .missingField, field: "user"),
        Malformed(json: #"{"command": "set_preferences", "user": "u", "whitelist": ["grades"]}"#, code: .invalidField, field: "whitelist"),
        Malformed(json: #"{"command": "set_preferences", "user": "u", "blacklist": {"grades": "final-grade"}}"#, code: .invalidField, field: "blacklist.grades"),
        Malformed(json: #"{"command": "set_preferences", "user": "u", "blacklist": {"grades": [1]}}"#, code: .invalidField, field: "blacklist.grades"),
        Malformed(json: #"{"command": "delete_user"}"#, code: .missingField, field: "user"),
        Malformed(json: #"{"command": "delete_user", "user": "\#(String(repeating: "u", count: 300))"}"#, code: .invalidField, field: "user"),
    ]

    @Test("malformed commands are refused with a stable code and the field named", arguments: malformed)
    func refused(_ entry: Malformed) {
        do {
            let command = try RegistryCommand(json: Array(entry.json.utf8))
            Issue.record("accepted: \(command)")
        } catch {
            #expect(error.code == entry.code, "\(error)")
            #expect(error.field == entry.field, "\(error)")
            if let field = entry.field { #expect(error.message.contains(field), "\(error.message)") }
        }
    }

    @Test("at least 20 kinds of malformed command")
    func corpusSize() { #expect(Self.malformed.count >= 20) }
}
