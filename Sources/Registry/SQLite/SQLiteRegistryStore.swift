import APNs
import Foundation
import Synchronization

/// The embedded registry: one SQLite file in WAL mode, shared by the workers of one host. The
/// schema is created and migrated on open; every statement is prepared once.
public final class SQLiteRegistryStore: RegistryStore {
    /// The schema this build writes; older files are migrated up to it on open.
    public static let schemaVersion = 1

    private let state: Mutex<Connection>

    /// The connection and its prepared statements, used under the lock only.
    private final class Connection: @unchecked Sendable {
        let database: SQLiteDatabase
        let upsertDevice, deleteDevice, connectDevice, disconnectDevice, ensureUser, ensureGroup, groupExists,
            addMembership, removeMembership, setPreferences, deleteUser, disconnectUserDevices, page, preferences,
            removeUnless, markInvalid, findDevice, usersOfTokens: SQLiteStatement

        init(_ database: SQLiteDatabase) throws(RegistryError) {
            self.database = database
            upsertDevice = try database.prepare("""
                INSERT INTO devices(app, token, user_id, registered_at, invalid) VALUES (?1, ?2, ?3, ?4, 0)
                ON CONFLICT(app, token) DO UPDATE SET registered_at = excluded.registered_at, invalid = 0,
                  user_id = COALESCE(excluded.user_id, devices.user_id)
                """)
            deleteDevice = try database.prepare("DELETE FROM devices WHERE app = ?1 AND token = ?2")
            connectDevice = try database.prepare("""
                INSERT INTO devices(app, token, user_id, registered_at, invalid) VALUES (?1, ?2, ?3, ?4, 0)
                ON CONFLICT(app, token) DO UPDATE SET user_id = excluded.user_id
                """)
            disconnectDevice = try database.prepare("UPDATE devices SET user_id = NULL WHERE app = ?1 AND token = ?2 AND user_id = ?3")
            ensureUser = try database.prepare("INSERT INTO users(id) VALUES (?1) ON CONFLICT(id) DO NOTHING")
            ensureGroup = try database.prepare("INSERT INTO groups(name) VALUES (?1) ON CONFLICT(name) DO NOTHING")
            groupExists = try database.prepare("SELECT 1 FROM groups WHERE name = ?1")
            addMembership = try database.prepare("INSERT INTO memberships(group_name, user_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING")
            removeMembership = try database.prepare("DELETE FROM memberships WHERE group_name = ?1 AND user_id = ?2")
            setPreferences = try database.prepare("UPDATE users SET whitelist = ?2, blacklist = ?3 WHERE id = ?1")
            deleteUser = try database.prepare("DELETE FROM users WHERE id = ?1")
            disconnectUserDevices = try database.prepare("UPDATE devices SET user_id = NULL WHERE user_id = ?1")
            page = try database.prepare("""
                SELECT token, user_id FROM devices
                WHERE app = ?1 AND invalid = 0 AND token > ?2 AND user_id IS NOT NULL
                  AND (user_id IN (SELECT value FROM json_each(?3))
                       OR user_id IN (SELECT user_id FROM memberships WHERE group_name IN (SELECT value FROM json_each(?4))))
                ORDER BY token LIMIT ?5
                """)
            preferences = try database.prepare("""
                SELECT id, whitelist, blacklist FROM users
                WHERE id IN (SELECT value FROM json_each(?1)) AND (whitelist != '{}' OR blacklist != '{}')
                """)
            removeUnless = try database.prepare("DELETE FROM devices WHERE app = ?1 AND token = ?2 AND registered_at <= ?3")
            markInvalid = try database.prepare("UPDATE devices SET invalid = 1 WHERE app = ?1 AND token = ?2")
            findDevice = try database.prepare("SELECT token, user_id FROM devices WHERE app = ?1 AND token = ?2 AND invalid = 0")
            usersOfTokens = try database.prepare("""
                SELECT token, user_id FROM devices
                WHERE app = ?1 AND invalid = 0 AND user_id IS NOT NULL AND token IN (SELECT value FROM json_each(?2))
                """)
        }
    }

    /// Opens or creates the registry at `path`, migrating its schema.
    public init(path: String) throws(RegistryError) {
        let database = try SQLiteDatabase(path: path)
        try Self.migrate(database)
        state = Mutex(try Connection(database))
    }

    private static func migrate(_ database: SQLiteDatabase) throws(RegistryError) {
        try database.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        var version = 0
        try database.prepare("SELECT MAX(version) FROM schema_version").run([]) { row in version = Int(row.integer(0)) }
        guard version <= schemaVersion else {
            throw RegistryError(.storeUnavailable, "the registry '\(database.path)' has schema version \(version); this pushworker knows up to \(schemaVersion): upgrade pushworker")
        }
        for step in version..<schemaVersion {
            try database.transaction { () throws(RegistryError) in
                for statement in Self.migrations[step] { try database.execute(statement) }
                try database.execute("INSERT INTO schema_version(version) VALUES (\(step + 1))")
            }
        }
    }

    /// Migration n brings the schema from version n to n + 1.
    static let migrations: [[String]] = [
        [
            "CREATE TABLE users (id TEXT PRIMARY KEY, whitelist TEXT NOT NULL DEFAULT '{}', blacklist TEXT NOT NULL DEFAULT '{}')",
            "CREATE TABLE groups (name TEXT PRIMARY KEY)",
            """
            CREATE TABLE devices (app TEXT NOT NULL, token TEXT NOT NULL,
              user_id TEXT REFERENCES users(id) ON DELETE SET NULL,
              registered_at REAL NOT NULL, invalid INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (app, token))
            """,
            "CREATE INDEX devices_by_user ON devices(user_id, app)",
            """
            CREATE TABLE memberships (group_name TEXT NOT NULL REFERENCES groups(name) ON DELETE CASCADE,
              user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, PRIMARY KEY (group_name, user_id))
            """,
            "CREATE INDEX memberships_by_user ON memberships(user_id)",
        ],
    ]

    public func apply(_ command: RegistryCommand) async throws(RegistryError) {
        try await apply(batch: [command])
    }

    public func apply(batch commands: [RegistryCommand]) async throws(RegistryError) {
        let now = Date().timeIntervalSince1970
        try state.withLock { (connection: inout Connection) throws(RegistryError) in
            let c = connection
            try c.database.transaction { () throws(RegistryError) in
                for command in commands { try Self.apply(command, on: c, now: now) }
            }
        }
    }

    private static func apply(_ command: RegistryCommand, on c: Connection, now: Double) throws(RegistryError) {
        switch command {
        case .registerDevice(let app, let token, let user):
            if let user { try c.ensureUser.run([.text(user)]) }
            try c.upsertDevice.run([.text(app), .text(token), user.map { .text($0) } ?? .null, .real(now)])
        case .unregisterDevice(let app, let token):
            try c.deleteDevice.run([.text(app), .text(token)])
        case .connect(let app, let token, let user):
            try c.ensureUser.run([.text(user)])
            try c.connectDevice.run([.text(app), .text(token), .text(user), .real(now)])
        case .disconnect(let app, let token, let user):
            try c.disconnectDevice.run([.text(app), .text(token), .text(user)])
        case .addToGroup(let user, let group, let createGroup):
            if createGroup {
                try c.ensureGroup.run([.text(group)])
            } else {
                var exists = false
                try c.groupExists.run([.text(group)]) { _ in exists = true }
                guard exists else { throw RegistryError(.unknownGroup, field: "group", "group '\(group)' does not exist, and create_group is false") }
            }
            try c.ensureUser.run([.text(user)])
            try c.addMembership.run([.text(group), .text(user)])
        case .removeFromGroup(let user, let group):
            try c.removeMembership.run([.text(group), .text(user)])
        case .setPreferences(let user, let preferences):
            try c.ensureUser.run([.text(user)])
            try c.setPreferences.run([.text(user), .text(Self.json(preferences.whitelist)), .text(Self.json(preferences.blacklist))])
        case .deleteUser(let user):
            try c.disconnectUserDevices.run([.text(user)])
            try c.deleteUser.run([.text(user)])
        }
    }

    public func devices(
        app: String, users: [String], groups: [String], pageSize: Int, _ page: ([RegisteredDevice]) async throws -> Void
    ) async throws {
        let usersJSON = Self.json(users), groupsJSON = Self.json(groups)
        var after = ""
        while true {
            let devices = try state.withLock { (connection: inout Connection) throws(RegistryError) -> [RegisteredDevice] in
                var devices: [RegisteredDevice] = []
                devices.reserveCapacity(pageSize)
                try connection.page.run([.text(app), .text(after), .text(usersJSON), .text(groupsJSON), .integer(Int64(pageSize))]) { row in
                    devices.append(RegisteredDevice(token: row.text(0) ?? "", user: row.text(1)))
                }
                return devices
            }
            guard let last = devices.last else { return }
            try await page(devices)
            guard devices.count == pageSize else { return }
            after = last.token
        }
    }

    public func preferences(of users: Set<String>) async throws(RegistryError) -> [String: NotificationPreferences] {
        guard !users.isEmpty else { return [:] }
        let list = Self.json(Array(users))
        return try state.withLock { (connection: inout Connection) throws(RegistryError) in
            var found: [String: NotificationPreferences] = [:]
            try connection.preferences.run([.text(list)]) { row in
                found[row.text(0) ?? ""] = NotificationPreferences(
                    whitelist: Self.exceptions(row.text(1)), blacklist: Self.exceptions(row.text(2)))
            }
            return found
        }
    }

    @discardableResult
    public func deviceRejected(app: String, token: String, reason: APNsErrorReason, at timestamp: Date?) async throws(RegistryError) -> Bool {
        try state.withLock { (connection: inout Connection) throws(RegistryError) -> Bool in
            switch reason {
            case .unregistered, .expiredToken:
                // Registered again after APNs last saw the token valid: the app still has it.
                let cutoff = (timestamp ?? Date()).timeIntervalSince1970
                try connection.removeUnless.run([.text(app), .text(token), .real(cutoff)])
            case .badDeviceToken, .deviceTokenNotForTopic:
                try connection.markInvalid.run([.text(app), .text(token)])
            default:
                return false
            }
            return connection.database.changes > 0
        }
    }

    public func users(app: String, tokens: [String]) async throws(RegistryError) -> [String: String] {
        guard !tokens.isEmpty else { return [:] }
        let list = Self.json(tokens)
        return try state.withLock { (connection: inout Connection) throws(RegistryError) in
            var users: [String: String] = [:]
            try connection.usersOfTokens.run([.text(app), .text(list)]) { row in
                if let token = row.text(0), let user = row.text(1) { users[token] = user }
            }
            return users
        }
    }

    public func device(app: String, token: String) async throws(RegistryError) -> RegisteredDevice? {
        try state.withLock { (connection: inout Connection) throws(RegistryError) -> RegisteredDevice? in
            var found: RegisteredDevice?
            try connection.findDevice.run([.text(app), .text(token)]) { row in found = RegisteredDevice(token: row.text(0) ?? "", user: row.text(1)) }
            return found
        }
    }

    private static func json(_ value: Any) -> String {
        (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
    }

    private static func exceptions(_ text: String?) -> [String: [String]] {
        guard let text, let map = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: [String]] else { return [:] }
        return map
    }
}
