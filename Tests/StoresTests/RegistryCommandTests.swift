import Stores
import TestSupport
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
        // As apps log it: NSData's description.
        let logged = "<" + stride(from: 0, to: 64, by: 8).map { Self.token.dropFirst($0).prefix(8).uppercased() }.joined(separator: " ") + ">"
        #expect(try read(#"{"command": "connect", "app": "news", "token": "\#(logged)", "user": "u-1"}"#)
            == .connect(app: "news", token: Self.token, user: "u-1"))
        #expect(try read(#"{"command": "unregister_device", "app": "news", "token": "\#(Self.token)"}"#) == .unregisterDevice(app: "news", token: Self.token))
        #expect(try read(#"{"command": "connect", "app": "a", "token": "\#(Self.token)", "user": "u"}"#) == .connect(app: "a", token: Self.token, user: "u"))
        #expect(try read(#"{"command": "disconnect", "app": "a", "token": "\#(Self.token)", "user": "u"}"#) == .disconnect(app: "a", token: Self.token, user: "u"))
        #expect(try read(#"{"command": "add_to_group", "user": "u", "group": "g"}"#) == .addToGroup(user: "u", group: "g", createGroup: true))
        #expect(try read(#"{"command": "add_to_group", "user": "u", "group": "g", "create_group": false}"#) == .addToGroup(user: "u", group: "g", createGroup: false))
        #expect(try read(#"{"command": "remove_from_group", "user": "u", "group": "g"}"#) == .removeFromGroup(user: "u", group: "g"))
        #expect(try read(#"{"command": "set_preferences", "user": "u", "whitelist": {"grades": ["final-grade"]}, "blacklist": {}}"#)
            == .setPreferences(.user("u"), NotificationPreferences(whitelist: ["grades": ["final-grade"]])))
        #expect(try read(#"{"command": "delete_user", "user": "u"}"#) == .deleteUser(user: "u"))
        #expect(try read(#"{"command": "replace_token", "app": "news", "old": "\#(Self.token)", "new": "<\#(Self.token.uppercased())>"}"#)
            == .replaceToken(app: "news", old: Self.token, new: Self.token))
    }

    @Test("register_device for an Android phone: the platform named or told by the token's form, the token's case kept; a token of the wrong form for its platform is refused naming it")
    func androidDevices() throws {
        func read(_ json: String) throws -> RegistryCommand { try RegistryCommand(json: Array(json.utf8)) }
        let pixel = "AbCd0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)
        #expect(try read(#"{"command": "register_device", "app": "news", "token": "\#(pixel)", "user": "u-1"}"#)
            == .registerDevice(app: "news", token: pixel, user: "u-1", platform: .fcm))
        #expect(try read(#"{"command": "register_device", "app": "news", "token": "\#(pixel)", "platform": "fcm"}"#)
            == .registerDevice(app: "news", token: pixel, user: nil, platform: .fcm))
        #expect(try read(#"{"command": "register_device", "app": "news", "token": "\#(Self.token)", "platform": "apns"}"#)
            == .registerDevice(app: "news", token: Self.token, user: nil, platform: .apns))
        #expect(try read(#"{"command": "unregister_device", "app": "news", "token": "\#(pixel)"}"#) == .unregisterDevice(app: "news", token: pixel))
        func refusal(_ json: String) -> StoreError? {
            do {
                _ = try read(json)
                return nil
            } catch {
                return error as? StoreError
            }
        }
        #expect(refusal(#"{"command": "register_device", "app": "news", "token": "\#(Self.token)", "platform": "fcm"}"#)?.field == "token")
        #expect(refusal(#"{"command": "register_device", "app": "news", "token": "\#(pixel)", "platform": "apns"}"#)?.field == "token")
        #expect(refusal(#"{"command": "register_device", "app": "news", "token": "\#(pixel)", "platform": "hms"}"#)?.field == "platform")
        // Live Activity tokens are APNs' only.
        #expect(refusal(#"{"command": "register_push_to_start_token", "app": "news", "token": "\#(pixel)"}"#)?.field == "token")
    }

    @Test("Live Activity commands read from their JSON into their namespace, keep their names, and are checked against the served apps by their base app")
    func liveActivityCommands() throws {
        func read(_ json: String) throws -> RegistryCommand { try RegistryCommand(json: Array(json.utf8)) }
        let start = try read(#"{"command": "register_push_to_start_token", "app": "news", "token": "\#(Self.token.uppercased())", "user": "u-1"}"#)
        #expect(start == .registerLiveActivityToken(app: "news", namespace: .pushToStart, token: Self.token, user: "u-1"))
        #expect(start.name == "register_push_to_start_token")
        let stop = try read(#"{"command": "unregister_push_to_start_token", "app": "news", "token": "\#(Self.token)"}"#)
        #expect(stop == .unregisterLiveActivityToken(app: "news", namespace: .pushToStart, token: Self.token))
        #expect(stop.name == "unregister_push_to_start_token")
        let activity = try read(#"{"command": "register_activity_token", "app": "news", "activity": "match-42#b:c", "token": "<\#(Self.token)>"}"#)
        #expect(activity == .registerLiveActivityToken(app: "news", namespace: .activity("match-42#b:c"), token: Self.token, user: nil))
        #expect(activity.name == "register_activity_token")
        let gone = try read(#"{"command": "unregister_activity_token", "app": "news", "activity": "A", "token": "\#(Self.token)"}"#)
        #expect(gone == .unregisterLiveActivityToken(app: "news", namespace: .activity("A"), token: Self.token))
        #expect(gone.name == "unregister_activity_token")
        let end = try read(#"{"command": "end_activity", "app": "news", "activity": "\#(String(repeating: "é", count: 64))"}"#)
        #expect(end == .endActivity(app: "news", activity: String(repeating: "é", count: 64)))
        #expect(end.name == "end_activity")

        try start.check(servedApps: ["news"])
        try end.check(servedApps: [])
        #expect(throws: StoreError.self) { try activity.check(servedApps: ["other"]) }
        do {
            try start.check(servedApps: ["other"])
            Issue.record("accepted")
        } catch {
            #expect(error.code == .unknownApp && error.field == "app", "\(error)")
        }
    }

    @Test("a namespace's registry app key reads back as its app and namespace; an id may hold # and :")
    func namespaces() {
        for namespace in [TokenNamespace.devices, .pushToStart, .activity("A"), .activity("x#activity:y"), .activity("push-to-start")] {
            let key = namespace.registryApp("news")
            let parsed = TokenNamespace.parse(key)
            #expect(parsed.app == "news" && parsed.namespace == namespace, "\(key)")
        }
        #expect(TokenNamespace.pushToStart.registryApp("news") == "news#push-to-start")
        #expect(TokenNamespace.activity("A").registryApp("news") == "news#activity:A")
        for unknown in ["news#something", "news#activity:"] {
            let parsed = TokenNamespace.parse(unknown)
            #expect(parsed.app == unknown && parsed.namespace == .devices, "a suffix this build does not know: \(unknown)")
        }
        #expect(TokenNamespace.preferencesApp("news#activity:A") == "news")
        #expect("\(TokenNamespace.activity("A"))" == "activity A" && "\(TokenNamespace.pushToStart)" == "push-to-start")
    }

    @Test("preference commands name a user, a user in one app, or a device with no user; entries come as type and exceptions or as one array")
    func preferenceCommands() throws {
        func read(_ json: String) throws -> RegistryCommand { try RegistryCommand(json: Array(json.utf8)) }
        #expect(try read(#"{"command": "add_to_whitelist", "user": "u", "type": "grades", "exceptions": ["final"]}"#)
            == .editPreferences(.user("u"), .add(.whitelist, type: "grades", exceptions: ["final"])))
        #expect(try read(#"{"command": "add_to_blacklist", "user": "u", "app": "news", "entry": ["grades", "final", "midterm"]}"#)
            == .editPreferences(.userApp("u", app: "news"), .add(.blacklist, type: "grades", exceptions: ["final", "midterm"])))
        #expect(try read(#"{"command": "add_to_blacklist", "app": "news", "token": "\#(Self.token.uppercased())", "type": "chat"}"#)
            == .editPreferences(.device(app: "news", token: Self.token), .add(.blacklist, type: "chat", exceptions: [])))
        #expect(try read(#"{"command": "remove_from_whitelist", "user": "u", "type": "grades"}"#)
            == .editPreferences(.user("u"), .remove(.whitelist, type: "grades")))
        #expect(try read(#"{"command": "remove_from_blacklist", "app": "news", "token": "\#(Self.token)", "type": "grades"}"#).name == "remove_from_blacklist")
        #expect(try read(#"{"command": "set_preferences", "user": "u", "app": "news", "blacklist": {"chat": []}}"#)
            == .setPreferences(.userApp("u", app: "news"), NotificationPreferences(blacklist: ["chat": []])))
        #expect(try RegistryRequest(json: Array(#"{"command": "get_preferences", "app": "news", "token": "\#(Self.token)"}"#.utf8))
            == .query(.getPreferences(.device(app: "news", token: Self.token))))
        // The edit leaves the other entries and the other list as they were.
        let before = NotificationPreferences(whitelist: ["news": []], blacklist: ["grades": ["final"]])
        #expect(PreferenceEdit.add(.blacklist, type: "chat", exceptions: []).applied(to: before)
            == NotificationPreferences(whitelist: ["news": []], blacklist: ["grades": ["final"], "chat": []]))
        #expect(PreferenceEdit.remove(.blacklist, type: "grades").applied(to: before) == NotificationPreferences(whitelist: ["news": []]))
        #expect(PreferenceEdit.add(.whitelist, type: "news", exceptions: ["x"]).applied(to: before).whitelist == ["news": ["x"]])
    }

    @Test("status is a query, read beside the commands; a query is not a command")
    func query() throws {
        let request = try RegistryRequest(json: Array(#"{"command": "status", "app": "news", "token": "\#(Self.token.uppercased())", "type": "grades"}"#.utf8))
        #expect(request == .query(.status(app: "news", token: Self.token, type: "grades", subtype: nil)))
        #expect(try RegistryRequest(json: Array(#"{"command": "delete_user", "user": "u"}"#.utf8)) == .command(.deleteUser(user: "u")))
        #expect(throws: StoreError.self) { try RegistryCommand(json: Array(#"{"command": "status", "app": "news", "token": "\#(Self.token)"}"#.utf8)) }
        do {
            _ = try RegistryRequest(json: Array(#"{"command": "stat"}"#.utf8))
            Issue.record("accepted")
        } catch {
            #expect(error.code == .unknownCommand && error.message.contains("replace_token, reset_badge, set_preferences, set_quiet_hours, set_time_zone, show_channel, status"), "\(error)")
        }
    }

    static let malformed = MalformedRegistryCommand.corpus

    @Test("malformed commands are refused with a stable code and the field named", arguments: malformed)
    func refused(_ entry: MalformedRegistryCommand) {
        do {
            let request = try RegistryRequest(json: Array(entry.json.utf8))
            Issue.record("accepted: \(request)")
        } catch {
            #expect(error.code.rawValue == entry.code, "\(error)")
            #expect(error.field == entry.field, "\(error)")
            if let field = entry.field { #expect(error.message.contains(field), "\(error.message)") }
        }
    }

    @Test("at least 20 kinds of malformed command")
    func corpusSize() { #expect(Self.malformed.count >= 20) }
}
