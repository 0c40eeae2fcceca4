import APNs
import Foundation
import Logging
import PostgresStores
@testable import SQLiteStores
@testable import Stores
import TestSupport
import Testing

/// What every registry store must do: the conformance suite. Runs against each store kind, each
/// test on a store of its own (an SQLite file, or a new database on the test PostgreSQL).
@Suite("Registry stores")
struct RegistryStoreTests {
    enum Kind: String, CaseIterable, CustomStringConvertible, Sendable {
        case sqlite
        case postgres
        var description: String { rawValue }

        func makeStore() async throws -> any RegistryStore {
            switch self {
            case .sqlite:
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db")
                return try SQLiteRegistryStore(path: file.path)
            case .postgres:
                return try await PostgresRegistryStore(url: try await TestPostgres.freshDatabase(), logger: Logger(label: "test.registry"))
            }
        }
    }

    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xD000) }

    static func command(_ json: String) throws -> RegistryCommand { try RegistryCommand(json: Array(json.utf8)) }

    /// The audience's devices in token order, checking its count and page sizes on the way.
    static func all(_ store: any RegistryStore, app: String = "news", users: [String] = [], groups: [String] = [], pageSize: Int = 1000) async throws -> [RegisteredDevice] {
        try await read(pageSize: pageSize) { try await store.withAudience(app: app, users: users, groups: groups, $0) }
    }

    /// What `withAudience` or `withAllDevices` hands over, in token order, with the count and
    /// the page sizes checked on the way.
    static func read(pageSize: Int, _ audience: ((any RegistryAudience) async throws -> Void) async throws -> Void) async throws -> [RegisteredDevice] {
        var devices: [RegisteredDevice] = []
        try await audience { audience in
            let count = try await audience.count()
            try await audience.pages(size: pageSize) { page in
                #expect(page.count <= pageSize && !page.isEmpty)
                devices += page
            }
            #expect(devices.count == count)
        }
        return devices.sorted { $0.token < $1.token }
    }

    @Test("devices of users and of group members resolve once each, in pages, for the job's app only", arguments: Kind.allCases)
    func resolution(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        for (index, user) in ["u-1", "u-1", "u-2", "u-3"].enumerated() {
            try await store.apply(.registerDevice(app: "news", token: Self.token(index), user: user))
        }
        try await store.apply(.registerDevice(app: "other", token: Self.token(9), user: "u-1"))
        try await store.apply(.registerDevice(app: "news", token: Self.token(8), user: nil))
        try await store.apply(.addToGroup(user: "u-2", group: "staff", createGroup: true))
        try await store.apply(.addToGroup(user: "u-1", group: "staff", createGroup: true))
        let preferences = NotificationPreferences(whitelist: ["grades": ["final"]])
        try await store.apply(.setPreferences(.user("u-3"), preferences))

        let byUser = try await Self.all(store, users: ["u-1"])
        #expect(byUser == [RegisteredDevice(token: Self.token(0), user: "u-1"), RegisteredDevice(token: Self.token(1), user: "u-1")])
        // u-1 is named and in the group: its devices come once. Each comes with its user's preferences.
        let both = try await Self.all(store, users: ["u-1", "u-3"], groups: ["staff"], pageSize: 2)
        #expect(both.map(\.token) == [0, 1, 2, 3].map(Self.token))
        #expect(both[3] == RegisteredDevice(token: Self.token(3), user: "u-3", preferences: preferences))
        var pages: [Int] = []
        try await store.withAudience(app: "news", users: ["u-1", "u-3"], groups: ["staff"]) { audience in
            try await audience.pages(size: 3) { pages.append($0.count) }
            // The job also names tokens 0 and 8: one of them is in the audience.
            #expect(try await audience.count(among: [Self.token(0), Self.token(8), Self.token(9)]) == 1)
        }
        #expect(pages == [3, 1])
        #expect(try await Self.all(store, groups: ["nobody"]).isEmpty)
        // Explicit tokens: only the connected ones of this app have a user.
        #expect(try await store.devices(app: "news", tokens: [Self.token(0), Self.token(8), Self.token(9), Self.token(3)])
            == [Self.token(0): RegisteredDevice(token: Self.token(0), user: "u-1"), Self.token(3): RegisteredDevice(token: Self.token(3), user: "u-3", preferences: preferences)])
        // A token alone (a one-device job's lookup, which SQLite makes without a list) finds what the list finds for it.
        let listed = try await store.devices(app: "news", tokens: [0, 8, 9, 3].map(Self.token))
        for index in [0, 8, 9, 3, 42] {
            #expect(try await store.devices(app: "news", tokens: [Self.token(index)]) == listed.filter { $0.key == Self.token(index) })
        }
    }

    @Test("Android devices: registered with their platform (named, or told by the token's form), resolved with it beside APNs devices, their token's case kept; replace_token and connect keep or tell it", arguments: Kind.allCases)
    func platforms(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        let pixel = "AbCd0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)
        let tablet = "EfGh0123456789abcdefgh:APA91bH" + String(repeating: "z9_-Pq", count: 22)
        for json in [
            #"{"command": "register_device", "app": "news", "token": "\#(Self.token(0))", "user": "u-1"}"#,
            #"{"command": "register_device", "app": "news", "token": "\#(pixel)", "user": "u-1"}"#,
            #"{"command": "register_device", "app": "news", "token": "\#(tablet)", "user": "u-2", "platform": "fcm"}"#,
        ] {
            try await store.apply(try Self.command(json))
        }
        try await store.apply(.addToGroup(user: "u-2", group: "g", createGroup: true))
        let devices = try await Self.all(store, users: ["u-1"], groups: ["g"])
        #expect(devices.map(\.platform) == [.apns, .fcm, .fcm] && devices.map(\.token) == [Self.token(0), pixel, tablet])
        #expect(try await store.device(app: "news", token: pixel) == RegisteredDevice(token: pixel, user: "u-1", platform: .fcm))
        #expect(try await store.devices(app: "news", tokens: [tablet])[tablet]?.platform == .fcm)
        // A new token for the Android phone stays an Android device, with its user.
        let renewed = "IjKl0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)
        try await store.apply(try Self.command(#"{"command": "replace_token", "app": "news", "old": "\#(pixel)", "new": "\#(renewed)"}"#))
        #expect(try await store.device(app: "news", token: renewed) == RegisteredDevice(token: renewed, user: "u-1", platform: .fcm))
        #expect(try await store.device(app: "news", token: pixel) == nil)
        // connect registers an unknown token with the platform its form tells.
        let fresh = "MnOp0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)
        try await store.apply(try Self.command(#"{"command": "connect", "app": "news", "token": "\#(fresh)", "user": "u-3"}"#))
        #expect(try await store.device(app: "news", token: fresh)?.platform == .fcm)
        // FCM's UNREGISTERED removes an Android device as APNs' 410 does.
        #expect(try await store.deviceRejected(app: "news", token: tablet, reason: .unregistered, at: nil))
        #expect(try await store.device(app: "news", token: tablet) == nil)
    }

    @Test("an audience is read in one snapshot: commands applied meanwhile change neither its count nor its pages", arguments: Kind.allCases)
    func snapshot(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        for index in 0..<10 {
            try await store.apply(.registerDevice(app: "news", token: Self.token(index), user: "u-\(index)"))
            try await store.apply(.addToGroup(user: "u-\(index)", group: "g", createGroup: true))
        }
        var seen = 0
        try await store.withAudience(app: "news", users: [], groups: ["g"]) { audience in
            #expect(try await audience.count() == 10)
            for index in 10..<15 {
                try await store.apply(.registerDevice(app: "news", token: Self.token(index), user: "u-\(index)"))
                try await store.apply(.addToGroup(user: "u-\(index)", group: "g", createGroup: true))
            }
            try await store.apply(.unregisterDevice(app: "news", token: Self.token(0)))
            try await audience.pages(size: 4) { seen += $0.count }
        }
        #expect(seen == 10)
        #expect(try await Self.all(store, groups: ["g"]).count == 14)
    }

    @Test("show: a user's devices, groups and preferences; a group's members and devices per app", arguments: Kind.allCases)
    func show(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.registerDevice(app: "chat", token: Self.token(2), user: "u-1"))
        try await store.apply(.registerDevice(app: "news", token: Self.token(3), user: "u-2"))
        try await store.deviceRejected(app: "news", token: Self.token(3), reason: .badDeviceToken, at: nil)
        for user in ["u-1", "u-2", "u-3"] { try await store.apply(.addToGroup(user: user, group: "staff", createGroup: true)) }
        try await store.apply(.addToGroup(user: "u-1", group: "art", createGroup: true))
        let preferences = NotificationPreferences(blacklist: ["grades": ["final"]])
        try await store.apply(.setPreferences(.user("u-1"), preferences))

        #expect(try await store.user("u-1") == RegisteredUser(
            id: "u-1", devices: [.init(app: "chat", token: Self.token(2), invalid: false), .init(app: "news", token: Self.token(1), invalid: false)],
            groups: ["art", "staff"], preferences: preferences))
        #expect(try await store.user("u-2")?.devices == [.init(app: "news", token: Self.token(3), invalid: true)])
        #expect(try await store.user("nobody") == nil)
        #expect(try await store.group("staff", sampleSize: 2) == RegisteredGroup(
            name: "staff", members: 3, devicesByApp: ["chat": 1, "news": 1], sample: ["u-1", "u-2"]))
        #expect(try await store.group("nothing", sampleSize: 2) == nil)
    }

    @Test("connect moves a device; disconnect and unregister break the connection and keep the user", arguments: Kind.allCases)
    func connections(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: nil))
        try await store.apply(.connect(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.connect(app: "news", token: Self.token(1), user: "u-2"))
        #expect(try await Self.all(store, users: ["u-1"]).isEmpty)
        #expect(try await store.device(app: "news", token: Self.token(1))?.user == "u-2")
        try await store.apply(.disconnect(app: "news", token: Self.token(1), user: "u-1"))  // not its user: nothing
        #expect(try await store.device(app: "news", token: Self.token(1))?.user == "u-2")
        try await store.apply(.disconnect(app: "news", token: Self.token(1), user: "u-2"))
        #expect(try await store.device(app: "news", token: Self.token(1))?.user == nil)
        try await store.apply(.connect(app: "news", token: Self.token(1), user: "u-2"))
        let preferences = NotificationPreferences(blacklist: ["news": []])
        try await store.apply(.setPreferences(.user("u-2"), preferences))
        try await store.apply(.unregisterDevice(app: "news", token: Self.token(1)))
        #expect(try await store.device(app: "news", token: Self.token(1)) == nil)
        #expect(try await store.user("u-2")?.preferences == preferences, "the user stays")
    }

    @Test("every command is idempotent", arguments: Kind.allCases)
    func idempotent(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        let commands: [RegistryCommand] = [
            .registerDevice(app: "news", token: Self.token(1), user: "u-1"), .connect(app: "news", token: Self.token(2), user: "u-1"),
            .addToGroup(user: "u-1", group: "g", createGroup: true), .setPreferences(.user("u-1"), NotificationPreferences(blacklist: ["t": []])),
            .removeFromGroup(user: "u-9", group: "g"), .disconnect(app: "news", token: Self.token(3), user: "u-1"),
            .unregisterDevice(app: "news", token: Self.token(4)), .deleteUser(user: "u-8"),
            .registerDevice(app: "news", token: Self.token(5), user: "u-1"), .replaceToken(app: "news", old: Self.token(5), new: Self.token(6)),
        ]
        for command in commands + commands { try await store.apply(command) }
        // Applied twice, the replacement's second round registers token 5 afresh and moves it again.
        #expect(try await Self.all(store, users: ["u-1"], groups: ["g"]).map(\.token) == [Self.token(1), Self.token(2), Self.token(6)])
        #expect(try await store.user("u-1")?.preferences == NotificationPreferences(blacklist: ["t": []]))
    }

    @Test("replace_token moves the user to the new token and removes the old; repeated, or with the old gone, it registers the new as it is", arguments: Kind.allCases)
    func replaceToken(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.registerDevice(app: "other", token: Self.token(1), user: "u-9"))
        try await store.apply(.addToGroup(user: "u-1", group: "g", createGroup: true))
        try await store.apply(.replaceToken(app: "news", old: Self.token(1), new: Self.token(2)))
        #expect(try await store.device(app: "news", token: Self.token(1)) == nil)
        #expect(try await store.device(app: "news", token: Self.token(2))?.user == "u-1")
        #expect(try await store.device(app: "other", token: Self.token(1))?.user == "u-9", "another app's device is its own")
        #expect(try await Self.all(store, groups: ["g"]).map(\.token) == [Self.token(2)])
        try await store.apply(.replaceToken(app: "news", old: Self.token(1), new: Self.token(2)))
        #expect(try await store.device(app: "news", token: Self.token(2))?.user == "u-1", "a repeat keeps the user")
        // The old token unknown (removed by a 410 meanwhile): the new one is registered, with no user.
        try await store.apply(.replaceToken(app: "news", old: Self.token(7), new: Self.token(8)))
        #expect(try await store.device(app: "news", token: Self.token(8)) == RegisteredDevice(token: Self.token(8), user: nil))
        // A new token already connected keeps its user when the old one had none.
        try await store.apply(.registerDevice(app: "news", token: Self.token(3), user: nil))
        try await store.apply(.registerDevice(app: "news", token: Self.token(4), user: "u-4"))
        try await store.apply(.replaceToken(app: "news", old: Self.token(3), new: Self.token(4)))
        #expect(try await store.device(app: "news", token: Self.token(4))?.user == "u-4")
        #expect(try await store.device(app: "news", token: Self.token(3)) == nil)
        // A token APNs marked invalid is replaced by a valid one.
        try await store.apply(.registerDevice(app: "news", token: Self.token(5), user: "u-5"))
        try await store.deviceRejected(app: "news", token: Self.token(5), reason: .badDeviceToken, at: nil)
        try await store.apply(.replaceToken(app: "news", old: Self.token(5), new: Self.token(6)))
        #expect(try await store.device(app: "news", token: Self.token(6))?.user == "u-5")
        // Old and new the same: registered, nothing removed.
        try await store.apply(.replaceToken(app: "news", old: Self.token(6), new: Self.token(6)))
        #expect(try await store.device(app: "news", token: Self.token(6))?.user == "u-5")
    }

    @Test("status: registered, user, the user's groups, whether a type reaches the device", arguments: Kind.allCases)
    func status(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.registerDevice(app: "news", token: Self.token(2), user: nil))
        try await store.apply(.addToGroup(user: "u-1", group: "b", createGroup: true))
        try await store.apply(.addToGroup(user: "u-1", group: "a", createGroup: true))
        try await store.apply(.setPreferences(.user("u-1"), NotificationPreferences(blacklist: ["grades": ["final"]])))
        #expect(try await store.status(app: "news", token: Self.token(1), type: "grades", subtype: "midterm")
            == DeviceStatus(app: "news", token: Self.token(1), registered: true, user: "u-1", groups: ["a", "b"], type: "grades", subtype: "midterm", reaches: false, badge: 0))
        #expect(try await store.status(app: "news", token: Self.token(1), type: "grades", subtype: "final").reaches == true)
        #expect(try await store.status(app: "news", token: Self.token(1), type: nil, subtype: nil).reaches == nil)
        #expect(try await store.status(app: "news", token: Self.token(2), type: "grades", subtype: nil)
            == DeviceStatus(app: "news", token: Self.token(2), registered: true, type: "grades", reaches: true, badge: 0))
        #expect(try await store.status(app: "other", token: Self.token(1), type: "grades", subtype: nil)
            == DeviceStatus(app: "other", token: Self.token(1), registered: false, type: "grades"))
    }

    @Test("preferences edited one type at a time, read back per scope; a user's for one app win over their app-wide ones there; a device with no user is filtered by its own", arguments: Kind.allCases)
    func scopedPreferences(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.registerDevice(app: "other", token: Self.token(2), user: "u-1"))
        try await store.apply(.registerDevice(app: "news", token: Self.token(3), user: nil))
        try await store.apply(.addToGroup(user: "u-1", group: "g", createGroup: true))
        for command in [
            #"{"command": "add_to_blacklist", "user": "u-1", "type": "grades", "exceptions": ["final"]}"#,
            #"{"command": "add_to_whitelist", "user": "u-1", "entry": ["news"]}"#,
            #"{"command": "add_to_whitelist", "user": "u-1", "entry": ["grades"]}"#,
            #"{"command": "remove_from_whitelist", "user": "u-1", "type": "news"}"#,
            #"{"command": "remove_from_whitelist", "user": "u-1", "type": "never-added"}"#,
            #"{"command": "add_to_blacklist", "user": "u-1", "app": "news", "entry": ["chat"]}"#,
            #"{"command": "add_to_blacklist", "app": "news", "token": "\#(Self.token(3))", "type": "grades"}"#,
        ] {
            try await store.apply(try Self.command(command))
        }
        let appWide = NotificationPreferences(whitelist: ["grades": []], blacklist: ["grades": ["final"]])
        let forNews = NotificationPreferences(blacklist: ["chat": []])
        #expect(try await store.preferences(.user("u-1")) == appWide)
        #expect(try await store.preferences(.userApp("u-1", app: "news")) == forNews)
        #expect(try await store.preferences(.userApp("u-1", app: "other")) == nil)
        #expect(try await store.preferences(.device(app: "news", token: Self.token(3))) == NotificationPreferences(blacklist: ["grades": []]))
        #expect(try await store.preferences(.user("nobody")) == nil)
        await #expect(throws: StoreError.unknownDevice(app: "news", token: Self.token(9))) {
            try await store.preferences(.device(app: "news", token: Self.token(9)))
        }
        await #expect(throws: StoreError.unknownDevice(app: "news", token: Self.token(9))) {
            try await store.apply(try Self.command(#"{"command": "add_to_blacklist", "app": "news", "token": "\#(Self.token(9))", "type": "grades"}"#))
        }
        #expect(try await store.device(app: "news", token: Self.token(9)) == nil, "a refused edit registers nothing")

        // Resolution: in news u-1's set for news applies; in other, the app-wide one.
        #expect(try await Self.all(store, app: "news", groups: ["g"]) == [RegisteredDevice(token: Self.token(1), user: "u-1", preferences: forNews)])
        #expect(try await Self.all(store, app: "other", users: ["u-1"]) == [RegisteredDevice(token: Self.token(2), user: "u-1", preferences: appWide)])
        #expect(try await store.devices(app: "news", tokens: [Self.token(1), Self.token(3)]) == [
            Self.token(1): RegisteredDevice(token: Self.token(1), user: "u-1", preferences: forNews),
            Self.token(3): RegisteredDevice(token: Self.token(3), user: nil, preferences: NotificationPreferences(blacklist: ["grades": []])),
        ])
        #expect(try await store.status(app: "news", token: Self.token(3), type: "grades", subtype: nil).reaches == false)
        #expect(try await store.status(app: "news", token: Self.token(1), type: "chat", subtype: nil).reaches == false)
        #expect(try await store.status(app: "news", token: Self.token(1), type: "grades", subtype: "final").reaches == true, "news ignores the app-wide set")

        // The device's own preferences move with a replaced token; once connected, the user's apply.
        try await store.apply(.replaceToken(app: "news", old: Self.token(3), new: Self.token(4)))
        #expect(try await store.preferences(.device(app: "news", token: Self.token(4))) == NotificationPreferences(blacklist: ["grades": []]))
        try await store.apply(.connect(app: "news", token: Self.token(4), user: "u-1"))
        #expect(try await store.device(app: "news", token: Self.token(4))?.preferences == forNews)
        // An empty set for one app is removed: the app-wide set applies there again.
        try await store.apply(try Self.command(#"{"command": "remove_from_blacklist", "user": "u-1", "app": "news", "type": "chat"}"#))
        #expect(try await store.preferences(.userApp("u-1", app: "news")) == nil)
        #expect(try await store.device(app: "news", token: Self.token(1))?.preferences == appWide)
        // Deleting the user removes their sets for apps too.
        try await store.apply(.setPreferences(.userApp("u-1", app: "other"), forNews))
        try await store.apply(.deleteUser(user: "u-1"))
        #expect(try await store.preferences(.userApp("u-1", app: "other")) == nil)
    }

    @Test("edits of one user's preferences from two stores at once lose none", arguments: Kind.allCases)
    func concurrentEdits(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        // A second store on the same file or database: another worker.
        let other: any RegistryStore
        if let sqlite = store as? SQLiteRegistryStore {
            other = try SQLiteRegistryStore(path: sqlite.path)
        } else {
            other = store
        }
        let types = (0..<40).map { "type-\($0)" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, type) in types.enumerated() {
                let target = index % 2 == 0 ? store : other
                group.addTask { try await target.apply(.editPreferences(.userApp("u-1", app: "news"), .add(.blacklist, type: type, exceptions: []))) }
                group.addTask { try await target.apply(.editPreferences(.user("u-1"), .add(.whitelist, type: type, exceptions: ["x"]))) }
            }
            try await group.waitForAll()
        }
        #expect(try await store.preferences(.userApp("u-1", app: "news"))?.blacklist.keys.sorted() == types.sorted())
        #expect(try await store.preferences(.user("u-1"))?.whitelist.count == types.count)
    }

    @Test("badge counters: a job raises each registered device's once, reset_badge clears a device's or a user's, replace_token moves it", arguments: Kind.allCases)
    func badges(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        for index in 1...3 { try await store.apply(.registerDevice(app: "news", token: Self.token(index), user: index < 3 ? "u-1" : "u-2")) }
        try await store.apply(.registerDevice(app: "other", token: Self.token(4), user: "u-1"))
        let tokens = [Self.token(1), Self.token(2), Self.token(3), Self.token(9)]
        #expect(try await store.incrementBadges(app: "news", tokens: tokens, by: 1, job: "a") == [Self.token(1): 1, Self.token(2): 1, Self.token(3): 1])
        // The same job again (a retry round, a redelivered chunk): no second increment.
        #expect(try await store.incrementBadges(app: "news", tokens: [Self.token(1)], by: 1, job: "a") == [Self.token(1): 1])
        #expect(try await store.incrementBadges(app: "news", tokens: [Self.token(1), Self.token(2)], by: 3, job: "b") == [Self.token(1): 4, Self.token(2): 4])
        #expect(try await store.incrementBadges(app: "other", tokens: [Self.token(4)], by: 2, job: "c") == [Self.token(4): 2])
        #expect(try await store.badgeCount(app: "news", token: Self.token(9)) == nil)
        #expect(try await store.status(app: "news", token: Self.token(1), type: nil, subtype: nil).badge == 4)

        try await store.apply(try Self.command(#"{"command": "reset_badge", "app": "news", "token": "\#(Self.token(2))"}"#))
        #expect(try await store.badgeCount(app: "news", token: Self.token(2)) == 0)
        try await store.apply(try Self.command(#"{"command": "reset_badge", "user": "u-1", "app": "other"}"#))
        #expect(try await store.badgeCount(app: "other", token: Self.token(4)) == 0)
        #expect(try await store.badgeCount(app: "news", token: Self.token(1)) == 4, "another app's counter stays")
        try await store.apply(try Self.command(#"{"command": "reset_badge", "user": "u-1"}"#))
        #expect(try await store.badgeCount(app: "news", token: Self.token(1)) == 0)
        #expect(try await store.badgeCount(app: "news", token: Self.token(3)) == 1, "another user's counter stays")
        try await store.apply(try Self.command(#"{"command": "reset_badge", "app": "news", "token": "\#(Self.token(9))"}"#))  // nothing to reset

        // A device marked invalid is not counted; a replaced token keeps its count, and the job that raised it.
        try await store.deviceRejected(app: "news", token: Self.token(2), reason: .badDeviceToken, at: nil)
        #expect(try await store.incrementBadges(app: "news", tokens: [Self.token(2)], by: 1, job: "d") == [:])
        try await store.apply(.replaceToken(app: "news", old: Self.token(3), new: Self.token(5)))
        #expect(try await store.badgeCount(app: "news", token: Self.token(5)) == 1)
        #expect(try await store.incrementBadges(app: "news", tokens: [Self.token(5)], by: 1, job: "a") == [Self.token(5): 1])
    }

    @Test("two workers raising the same devices' badges at once lose no increment", arguments: Kind.allCases)
    func concurrentBadges(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        let other: any RegistryStore = try (store as? SQLiteRegistryStore).map { try SQLiteRegistryStore(path: $0.path) } ?? store
        let tokens = (1...20).map(Self.token)
        for token in tokens { try await store.apply(.registerDevice(app: "news", token: token, user: nil)) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for job in 0..<60 {
                let target = job % 2 == 0 ? store : other
                // Overlapping sets in different orders, as two broadcasts' pages would be.
                let batch = job % 3 == 0 ? Array(tokens.reversed()) : tokens
                group.addTask { _ = try await target.incrementBadges(app: "news", tokens: batch, by: 1, job: "job-\(job)") }
            }
            try await group.waitForAll()
        }
        for token in tokens { #expect(try await store.badgeCount(app: "news", token: token) == 60) }
    }

    @Test("add_to_group with create_group false refuses a missing group and changes nothing", arguments: Kind.allCases)
    func unknownGroup(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        await #expect(throws: StoreError(.unknownGroup, field: "group", "group 'art' does not exist, and create_group is false")) {
            try await store.apply(.addToGroup(user: "u-1", group: "art", createGroup: false))
        }
        try await store.apply(.addToGroup(user: "u-2", group: "art", createGroup: true))
        try await store.apply(.addToGroup(user: "u-1", group: "art", createGroup: false))
        #expect(try await Self.all(store, groups: ["art"]).map(\.token) == [Self.token(1)])
    }

    @Test("delete_user removes the user and their memberships; their devices stay, unconnected", arguments: Kind.allCases)
    func deleteUser(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.addToGroup(user: "u-1", group: "g", createGroup: true))
        try await store.apply(.setPreferences(.user("u-1"), NotificationPreferences(whitelist: ["a": []])))
        try await store.apply(.deleteUser(user: "u-1"))
        #expect(try await Self.all(store, users: ["u-1"], groups: ["g"]).isEmpty)
        #expect(try await store.device(app: "news", token: Self.token(1)) == RegisteredDevice(token: Self.token(1), user: nil))
        #expect(try await store.user("u-1") == nil)
    }

    @Test("a 410 removes the device unless it registered again after the 410's timestamp; BadDeviceToken marks it invalid", arguments: Kind.allCases)
    func feedback(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.registerDevice(app: "news", token: Self.token(2), user: "u-1"))
        try await store.apply(.registerDevice(app: "news", token: Self.token(3), user: "u-1"))
        // APNs last saw token 1 valid an hour ago: it is gone. Token 2 registered after that moment.
        #expect(try await store.deviceRejected(app: "news", token: Self.token(1), reason: .unregistered, at: Date()))
        #expect(try await store.deviceRejected(app: "news", token: Self.token(2), reason: .expiredToken, at: Date(timeIntervalSinceNow: -3600)) == false)
        #expect(try await store.deviceRejected(app: "news", token: Self.token(3), reason: .badDeviceToken, at: nil))
        #expect(try await store.deviceRejected(app: "news", token: Self.token(2), reason: .tooManyRequests, at: nil) == false)
        #expect(try await Self.all(store, users: ["u-1"]).map(\.token) == [Self.token(2)])
        // Registered again: valid again.
        try await store.apply(.registerDevice(app: "news", token: Self.token(3), user: "u-1"))
        #expect(try await Self.all(store, users: ["u-1"]).map(\.token) == [Self.token(2), Self.token(3)])
    }

    /// Every device of `app` (a Live Activity's namespace) in token order, checking the count and
    /// the page sizes on the way.
    static func allDevices(_ store: any RegistryStore, app: String, pageSize: Int = 1000) async throws -> [RegisteredDevice] {
        try await read(pageSize: pageSize) { try await store.withAllDevices(app: app, $0) }
    }

    @Test("push-to-start tokens resolve for users and groups in their own namespace, with the users' preferences for the base app", arguments: Kind.allCases)
    func pushToStartTokens(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        let pushToStart = TokenNamespace.pushToStart.registryApp("news")
        // Ordinary devices of the same users: not reached by a start job.
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.registerDevice(app: "news", token: Self.token(2), user: "u-2"))
        for (index, user) in ["u-1", "u-2", "u-3"].enumerated() {
            try await store.apply(try Self.command(#"{"command": "register_push_to_start_token", "app": "news", "token": "\#(Self.token(11 + index))", "user": "\#(user)"}"#))
        }
        try await store.apply(.registerLiveActivityToken(app: "other", namespace: .pushToStart, token: Self.token(19), user: "u-1"))
        try await store.apply(.addToGroup(user: "u-1", group: "g", createGroup: true))
        try await store.apply(.addToGroup(user: "u-2", group: "g", createGroup: true))
        let forNews = NotificationPreferences(blacklist: ["promotions": []])
        let appWide = NotificationPreferences(whitelist: ["scores": []])
        try await store.apply(.setPreferences(.userApp("u-1", app: "news"), forNews))
        try await store.apply(.setPreferences(.user("u-1"), appWide))
        try await store.apply(.setPreferences(.user("u-2"), appWide))
        // A set kept under the namespace's own key is no app's: it never applies.
        try await store.apply(.setPreferences(.userApp("u-2", app: pushToStart), forNews))

        let expected = [
            RegisteredDevice(token: Self.token(11), user: "u-1", preferences: forNews),
            RegisteredDevice(token: Self.token(12), user: "u-2", preferences: appWide),
            RegisteredDevice(token: Self.token(13), user: "u-3"),
        ]
        #expect(try await Self.all(store, app: pushToStart, users: ["u-3"], groups: ["g"], pageSize: 2) == expected)
        #expect(try await Self.all(store, app: pushToStart, groups: ["g"]) == Array(expected.prefix(2)), "one group: its members' tokens")
        #expect(try await Self.all(store, app: "news", groups: ["g"]).map(\.token) == [Self.token(1), Self.token(2)], "devices stay devices")
        #expect(try await store.devices(app: pushToStart, tokens: [Self.token(11), Self.token(1)]) == [Self.token(11): expected[0]])
        #expect(try await store.device(app: pushToStart, token: Self.token(11)) == expected[0])
        // show user: the token under its app, its namespace named.
        #expect(try await store.user("u-1")?.devices == [
            .init(app: "news", token: Self.token(1), invalid: false),
            .init(app: "news", token: Self.token(11), invalid: false, namespace: .pushToStart),
            .init(app: "other", token: Self.token(19), invalid: false, namespace: .pushToStart),
        ])
        try await store.apply(try Self.command(#"{"command": "unregister_push_to_start_token", "app": "news", "token": "\#(Self.token(11))"}"#))
        #expect(try await Self.all(store, app: pushToStart, groups: ["g"]) == [expected[1]])
        #expect(try await store.device(app: "news", token: Self.token(1))?.user == "u-1", "the device of the same user stays")
    }

    @Test("an activity's tokens resolve together, users or none, in one snapshot; end_activity removes them and only them", arguments: Kind.allCases)
    func activityTokens(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        let activityA = TokenNamespace.activity("A").registryApp("news"), activityB = TokenNamespace.activity("B").registryApp("news")
        try await store.apply(try Self.command(#"{"command": "register_activity_token", "app": "news", "activity": "A", "token": "\#(Self.token(1))", "user": "u-1"}"#))
        try await store.apply(try Self.command(#"{"command": "register_activity_token", "app": "news", "activity": "A", "token": "\#(Self.token(2))", "user": "u-2"}"#))
        try await store.apply(try Self.command(#"{"command": "register_activity_token", "app": "news", "activity": "A", "token": "\#(Self.token(3))"}"#))
        try await store.apply(try Self.command(#"{"command": "register_activity_token", "app": "news", "activity": "B", "token": "\#(Self.token(4))", "user": "u-1"}"#))
        // The same token in another app's activity A, and an ordinary device: neither is A's.
        try await store.apply(.registerLiveActivityToken(app: "other", namespace: .activity("A"), token: Self.token(5), user: "u-1"))
        try await store.apply(.registerDevice(app: "news", token: Self.token(6), user: "u-1"))
        let forNews = NotificationPreferences(blacklist: ["promotions": []])
        let appWide = NotificationPreferences(whitelist: ["scores": []])
        let own = NotificationPreferences(blacklist: ["scores": ["final"]])
        try await store.apply(.setPreferences(.userApp("u-1", app: "news"), forNews))
        try await store.apply(.setPreferences(.user("u-2"), appWide))
        // The token with no user is filtered by its own set, as `devices(app:tokens:)` gives it.
        try await store.apply(.setPreferences(.device(app: activityA, token: Self.token(3)), own))

        let expected = [
            RegisteredDevice(token: Self.token(1), user: "u-1", preferences: forNews),
            RegisteredDevice(token: Self.token(2), user: "u-2", preferences: appWide),
            RegisteredDevice(token: Self.token(3), user: nil, preferences: own),
        ]
        #expect(try await Self.allDevices(store, app: activityA, pageSize: 2) == expected)
        var pages: [Int] = []
        try await store.withAllDevices(app: activityA) { audience in
            #expect(try await audience.count() == 3)
            // Registered and removed meanwhile: the snapshot sees neither.
            try await store.apply(.registerLiveActivityToken(app: "news", namespace: .activity("A"), token: Self.token(7), user: "u-3"))
            try await store.apply(.unregisterLiveActivityToken(app: "news", namespace: .activity("A"), token: Self.token(2)))
            #expect(try await audience.count(among: [Self.token(1), Self.token(3), Self.token(4), Self.token(5), Self.token(9)]) == 2)
            #expect(try await audience.devices(tokens: [Self.token(1), Self.token(3), Self.token(4)])
                == [Self.token(1): expected[0], Self.token(3): expected[2]])
            try await audience.pages(size: 2) { pages.append($0.count) }
        }
        #expect(pages == [2, 1])
        #expect(try await Self.allDevices(store, app: activityA).map(\.token) == [Self.token(1), Self.token(3), Self.token(7)])
        // A token APNs called bad is not resolved.
        try await store.deviceRejected(app: activityA, token: Self.token(7), reason: .badDeviceToken, at: nil)
        #expect(try await Self.allDevices(store, app: activityA).map(\.token) == [Self.token(1), Self.token(3)])
        #expect(try await store.user("u-1")?.devices.map(\.namespace) == [.devices, .activity("A"), .activity("B"), .activity("A")])

        try await store.apply(try Self.command(#"{"command": "end_activity", "app": "news", "activity": "A"}"#))
        #expect(try await Self.allDevices(store, app: activityA).isEmpty)
        #expect(try await Self.allDevices(store, app: activityB) == [RegisteredDevice(token: Self.token(4), user: "u-1", preferences: forNews)])
        #expect(try await Self.allDevices(store, app: TokenNamespace.activity("A").registryApp("other")).map(\.token) == [Self.token(5)])
        #expect(try await store.device(app: "news", token: Self.token(6))?.user == "u-1")
        #expect(try await store.user("u-2") != nil, "ending an activity keeps its users")
        try await store.apply(.endActivity(app: "news", activity: "A"))  // again: nothing to remove
    }

    @Test("a 410 for an activity token removes it unless it registered again after the 410's timestamp", arguments: Kind.allCases)
    func activityFeedback(_ kind: Kind) async throws {
        let store = try await kind.makeStore()
        let activityA = TokenNamespace.activity("A").registryApp("news")
        for index in 1...2 {
            try await store.apply(.registerLiveActivityToken(app: "news", namespace: .activity("A"), token: Self.token(index), user: "u-1"))
        }
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        #expect(try await store.deviceRejected(app: activityA, token: Self.token(1), reason: .unregistered, at: Date()))
        #expect(try await store.deviceRejected(app: activityA, token: Self.token(2), reason: .unregistered, at: Date(timeIntervalSinceNow: -3600)) == false)
        #expect(try await Self.allDevices(store, app: activityA).map(\.token) == [Self.token(2)])
        #expect(try await store.device(app: "news", token: Self.token(1)) != nil, "the device token of the same value stays")
    }

    @Test("the SQLite file keeps everything across reopening, and two stores on one file see each other's writes")
    func sqliteFile() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db").path
        let first = try SQLiteRegistryStore(path: file)
        let second = try SQLiteRegistryStore(path: file)
        try await first.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await second.apply(.addToGroup(user: "u-1", group: "g", createGroup: true))
        #expect(try await Self.all(second, groups: ["g"]).map(\.token) == [Self.token(1)])
        let reopened = try SQLiteRegistryStore(path: file)
        #expect(try await Self.all(reopened, groups: ["g"]).map(\.token) == [Self.token(1)])
    }

    @Test("audiences read at once each get a connection; once read, at most four stay open for the next")
    func idleReadersBounded() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db").path
        let store = try SQLiteRegistryStore(path: file)
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.addToGroup(user: "u-1", group: "g", createGroup: true))
        // Ten snapshots open together: each body waits until all ten have read their count.
        let reading = 10
        let started = Locked(0)
        try await withTimeout(.seconds(60), "ten audiences read at once") {
            try await withThrowingTaskGroup(of: [String].self) { group in
                for _ in 0..<reading {
                    group.addTask {
                        try await Self.read(pageSize: 10) { read in
                            try await store.withAudience(app: "news", users: [], groups: ["g"]) { audience in
                                started.withLock { $0 += 1 }
                                while started.value < reading { try await Task.sleep(for: .milliseconds(5)) }
                                try await read(audience)
                            }
                        }.map(\.token)
                    }
                }
                for try await tokens in group { #expect(tokens == [Self.token(1)]) }
            }
        }
        #expect(store.idleReaders == SQLiteRegistryStore.maxIdleReaders)
        // The kept ones serve the next audience.
        #expect(try await Self.all(store, groups: ["g"]).map(\.token) == [Self.token(1)])
        #expect(store.idleReaders == SQLiteRegistryStore.maxIdleReaders)
    }

    @Test("a file that is not a database is refused with its path")
    func notADatabase() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db")
        try Data(String(repeating: "not sqlite ", count: 200).utf8).write(to: file)
        do {
            _ = try SQLiteRegistryStore(path: file.path)
            Issue.record("opened a file that is not a database")
        } catch {
            #expect(error.code == .storeUnavailable && error.message.contains(file.path), "\(error)")
        }
    }
}

/// Files written by an older pushworker are migrated in place, their data kept.
@Suite("Registry schema migrations")
struct RegistryMigrationTests {
    @Test("an SQLite registry of schema version 1 opens as the current version with every user, device, group, membership and preference")
    func sqliteVersion1() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-v1-\(UUID().uuidString.prefix(8)).db").path
        do {
            let database = try SQLiteDatabase(path: file)
            try database.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            for statement in SQLiteRegistryStore.migrations[0] { try database.execute(statement) }
            try database.execute("INSERT INTO schema_version(version) VALUES (1)")
            try database.execute(#"INSERT INTO users(id, blacklist) VALUES ('u-1', '{"grades":[]}'), ('u-2', '{}')"#)
            try database.execute("INSERT INTO groups(name) VALUES ('staff')")
            try database.execute("INSERT INTO memberships(group_name, user_id) VALUES ('staff', 'u-1'), ('staff', 'u-2')")
            try database.execute("""
                INSERT INTO devices(app, token, user_id, registered_at, invalid) VALUES
                ('news', '\(RegistryStoreTests.token(1))', 'u-1', 1, 0), ('news', '\(RegistryStoreTests.token(2))', 'u-2', 1, 1),
                ('news', '\(RegistryStoreTests.token(3))', NULL, 1, 0)
                """)
        }
        let store = try SQLiteRegistryStore(path: file)
        #expect(try await store.user("u-1") == RegisteredUser(
            id: "u-1", devices: [.init(app: "news", token: RegistryStoreTests.token(1), invalid: false)], groups: ["staff"],
            preferences: NotificationPreferences(blacklist: ["grades": []])))
        #expect(try await store.user("u-2")?.devices == [.init(app: "news", token: RegistryStoreTests.token(2), invalid: true)])
        #expect(try await store.device(app: "news", token: RegistryStoreTests.token(3)) == RegisteredDevice(token: RegistryStoreTests.token(3), user: nil))
        #expect(try await RegistryStoreTests.all(store, groups: ["staff"]).map(\.token) == [RegistryStoreTests.token(1)])
        // Foreign keys are on again: deleting a user still disconnects its devices.
        try await store.apply(.deleteUser(user: "u-1"))
        #expect(try await store.device(app: "news", token: RegistryStoreTests.token(1))?.user == nil)
        #expect(try await store.group("staff", sampleSize: 5)?.members == 1)
    }
}
