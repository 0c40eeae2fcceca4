import CSQLite
import Stores
import APNs
import Foundation
import Synchronization

/// The embedded registry: one SQLite file in WAL mode, shared by the workers of one host. The
/// schema is created and migrated on open; every statement is prepared once.
public final class SQLiteRegistryStore: RegistryStore {
    /// The schema this build writes; older files are migrated up to it on open.
    public static let schemaVersion = 5

    private let state: Mutex<Connection>

    /// The connection and its prepared statements, used under the lock only.
    private final class Connection: @unchecked Sendable {
        let database: SQLiteDatabase
        let upsertDevice, deleteDevice, connectDevice, disconnectDevice, ensureUser, ensureGroup, groupExists,
            addMembership, removeMembership, setPreferences, deleteUser, disconnectUserDevices,
            removeUnless, markInvalid, findDevice, devicesOfTokens, devicesOfToken, findUser, userDevices, userGroups, groupMembers,
            groupDevices, groupSample, takeOver, setAppPreferences, deleteAppPreferences, findAppPreferences,
            setDevicePreferences, findDevicePreferences, incrementBadges, findBadge, moveBadge, resetDeviceBadge,
            resetUserBadges, deleteApp: SQLiteStatement
        let setUserZone, setDeviceZone, setUserQuiet, setAppQuiet, deleteAppQuiet, timingOfTokens, userTiming, userAppTiming,
            deviceTiming: SQLiteStatement

        init(_ database: SQLiteDatabase) throws(StoreError) {
            self.database = database
            setUserZone = try database.prepare("UPDATE users SET time_zone = ?2 WHERE id = ?1")
            setDeviceZone = try database.prepare("UPDATE devices SET time_zone = ?3 WHERE app = ?1 AND token = ?2")
            setUserQuiet = try database.prepare("UPDATE users SET quiet_hours = ?2 WHERE id = ?1")
            setAppQuiet = try database.prepare("""
                INSERT INTO app_quiet_hours(user_id, app, quiet_hours) VALUES (?1, ?2, ?3)
                ON CONFLICT(user_id, app) DO UPDATE SET quiet_hours = excluded.quiet_hours
                """)
            deleteAppQuiet = try database.prepare("DELETE FROM app_quiet_hours WHERE user_id = ?1 AND app = ?2")
            timingOfTokens = try database.prepare("""
                SELECT d.token, COALESCE(d.time_zone, u.time_zone), COALESCE(q.quiet_hours, u.quiet_hours) FROM devices d
                LEFT JOIN users u ON u.id = d.user_id LEFT JOIN app_quiet_hours q ON q.user_id = d.user_id AND q.app = ?3
                WHERE d.app = ?1 AND d.token IN (SELECT value FROM json_each(?2))
                  AND (d.time_zone IS NOT NULL OR u.time_zone IS NOT NULL OR u.quiet_hours IS NOT NULL OR q.quiet_hours IS NOT NULL)
                """)
            userTiming = try database.prepare("SELECT time_zone, quiet_hours FROM users WHERE id = ?1")
            userAppTiming = try database.prepare("SELECT quiet_hours FROM app_quiet_hours WHERE user_id = ?1 AND app = ?2")
            deviceTiming = try database.prepare("SELECT time_zone FROM devices WHERE app = ?1 AND token = ?2")
            upsertDevice = try database.prepare("""
                INSERT INTO devices(app, token, user_id, registered_at, invalid, platform) VALUES (?1, ?2, ?3, ?4, 0, ?5)
                ON CONFLICT(app, token) DO UPDATE SET registered_at = excluded.registered_at, invalid = 0,
                  user_id = COALESCE(excluded.user_id, devices.user_id), platform = excluded.platform
                """)
            deleteDevice = try database.prepare("DELETE FROM devices WHERE app = ?1 AND token = ?2")
            connectDevice = try database.prepare("""
                INSERT INTO devices(app, token, user_id, registered_at, invalid, platform) VALUES (?1, ?2, ?3, ?4, 0, ?5)
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
            removeUnless = try database.prepare("DELETE FROM devices WHERE app = ?1 AND token = ?2 AND registered_at <= ?3")
            markInvalid = try database.prepare("UPDATE devices SET invalid = 1 WHERE app = ?1 AND token = ?2")
            findDevice = try database.prepare("""
                SELECT d.token, d.user_id, \(SQLiteRegistryStore.effectivePreferences), d.platform FROM devices d LEFT JOIN users u ON u.id = d.user_id
                LEFT JOIN app_preferences p ON p.user_id = d.user_id AND p.app = ?3
                WHERE d.app = ?1 AND d.token = ?2 AND d.invalid = 0
                """)
            devicesOfTokens = try database.prepare(SQLiteRegistryStore.devicesOfTokens)
            devicesOfToken = try database.prepare(SQLiteRegistryStore.devicesOfToken)
            findUser = try database.prepare("SELECT whitelist, blacklist FROM users WHERE id = ?1")
            userDevices = try database.prepare("SELECT app, token, invalid FROM devices WHERE user_id = ?1 ORDER BY app, token")
            userGroups = try database.prepare("SELECT group_name FROM memberships WHERE user_id = ?1 ORDER BY group_name")
            groupMembers = try database.prepare("SELECT (SELECT COUNT(*) FROM memberships WHERE group_name = ?1) FROM groups WHERE name = ?1")
            groupDevices = try database.prepare("""
                SELECT d.app, COUNT(*) FROM memberships m JOIN devices d ON d.user_id = m.user_id
                WHERE m.group_name = ?1 AND d.invalid = 0 GROUP BY d.app ORDER BY d.app
                """)
            groupSample = try database.prepare("SELECT user_id FROM memberships WHERE group_name = ?1 ORDER BY user_id LIMIT ?2")
            takeOver = try database.prepare(SQLiteRegistryStore.takeOver)
            setAppPreferences = try database.prepare("""
                INSERT INTO app_preferences(user_id, app, whitelist, blacklist) VALUES (?1, ?2, ?3, ?4)
                ON CONFLICT(user_id, app) DO UPDATE SET whitelist = excluded.whitelist, blacklist = excluded.blacklist
                """)
            deleteAppPreferences = try database.prepare("DELETE FROM app_preferences WHERE user_id = ?1 AND app = ?2")
            findAppPreferences = try database.prepare("SELECT whitelist, blacklist FROM app_preferences WHERE user_id = ?1 AND app = ?2")
            setDevicePreferences = try database.prepare("UPDATE devices SET whitelist = ?3, blacklist = ?4 WHERE app = ?1 AND token = ?2")
            findDevicePreferences = try database.prepare("SELECT whitelist, blacklist FROM devices WHERE app = ?1 AND token = ?2")
            incrementBadges = try database.prepare("""
                UPDATE devices SET badge = CASE WHEN badge_job IS ?3 THEN badge ELSE badge + ?4 END, badge_job = ?3
                WHERE app = ?1 AND invalid = 0 AND token IN (SELECT value FROM json_each(?2)) RETURNING token, badge
                """)
            findBadge = try database.prepare("SELECT badge FROM devices WHERE app = ?1 AND token = ?2 AND invalid = 0")
            moveBadge = try database.prepare("""
                UPDATE devices SET (badge, badge_job) = (SELECT o.badge, o.badge_job FROM devices o WHERE o.app = ?1 AND o.token = ?2)
                WHERE app = ?1 AND token = ?3 AND EXISTS (SELECT 1 FROM devices o WHERE o.app = ?1 AND o.token = ?2)
                """)
            resetDeviceBadge = try database.prepare("UPDATE devices SET badge = 0 WHERE app = ?1 AND token = ?2")
            resetUserBadges = try database.prepare("UPDATE devices SET badge = 0 WHERE user_id = ?1 AND (?2 IS NULL OR app = ?2)")
            deleteApp = try database.prepare("DELETE FROM devices WHERE app = ?1")
        }
    }

    /// The preferences that filter a device (`d`, its user `u`, the user's for the app `p`): the
    /// user's for the app, else the user's, else (no user) the device's own. A user's lists are
    /// never NULL, so a device's own count only when it has no user.
    static let effectivePreferences = "COALESCE(p.whitelist, u.whitelist, d.whitelist), COALESCE(p.blacklist, u.blacklist, d.blacklist)"

    /// Registered, valid devices of app ?1 among the tokens of JSON array ?2 that are connected
    /// or have preferences of their own; users' per-app preferences are those for app ?3 (the
    /// base app of a Live Activity namespace, `TokenNamespace.preferencesApp`).
    static let devicesOfTokens = devices(where: "d.token IN (SELECT value FROM json_each(?2))")

    /// `devicesOfTokens` for the one token ?2, bound as itself.
    static let devicesOfToken = devices(where: "d.token = ?2")

    private static func devices(where tokens: String) -> String {
        """
        SELECT d.token, d.user_id, \(effectivePreferences), d.platform FROM devices d LEFT JOIN users u ON u.id = d.user_id
        LEFT JOIN app_preferences p ON p.user_id = d.user_id AND p.app = ?3
        WHERE d.app = ?1 AND d.invalid = 0 AND \(tokens)
          AND (d.user_id IS NOT NULL OR d.whitelist IS NOT NULL)
        """
    }

    /// Registers token ?3 of app ?1 now (?4) with the user of token ?2, if it has one; a user the
    /// new token already has stays when the old one had none.
    static let takeOver = """
        INSERT INTO devices(app, token, user_id, registered_at, invalid, whitelist, blacklist, platform)
          SELECT ?1, ?3, o.user_id, ?4, 0, o.whitelist, o.blacklist, ?5 FROM (SELECT 1) LEFT JOIN devices o ON o.app = ?1 AND o.token = ?2
        WHERE true
        ON CONFLICT(app, token) DO UPDATE SET registered_at = excluded.registered_at, invalid = 0,
          user_id = COALESCE(excluded.user_id, devices.user_id),
          whitelist = COALESCE(excluded.whitelist, devices.whitelist), blacklist = COALESCE(excluded.blacklist, devices.blacklist)
        """

    /// Connections that read audiences, one per resolution at a time: a snapshot read page by
    /// page holds its connection across suspension points, so it cannot be the writers' one.
    /// Idle ones are kept up to `maxIdleReaders`: jobs in hand bound how many read at once (64 in
    /// the now lane alone), and each keeps a page cache of up to 2 MB, so a burst of group jobs
    /// would otherwise leave its high-water mark of connections open for the process's life.
    private let readers: Mutex<[SQLiteAudience.Reader]> = Mutex([])
    /// Enough for the audiences a worker reads at once in steady use; one more opens a
    /// connection and prepares its statements, small beside reading a group (not measured).
    static let maxIdleReaders = 4
    /// The registry file.
    public let path: String

    /// Opens or creates the registry at `path`, migrating its schema.
    public init(path: String) throws(StoreError) {
        let database = try SQLiteDatabase(path: path)
        try Self.migrate(database)
        state = Mutex(try Connection(database))
        self.path = path
    }

    private static func migrate(_ database: SQLiteDatabase) throws(StoreError) {
        // Tables are rebuilt by copying them: foreign keys are off meanwhile, or dropping the
        // old `users` would disconnect every device (ON DELETE SET NULL). SQLite ignores the
        // pragma inside a transaction, so it is set around it.
        try database.execute("PRAGMA foreign_keys = OFF")
        defer { try? database.execute("PRAGMA foreign_keys = ON") }
        // The version is read under the write lock: two workers starting on one file migrate
        // one after the other, the second finding nothing left to do.
        try database.transaction { () throws(StoreError) in
            try database.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            var version = 0
            try database.prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version").run([]) { row in version = Int(row.integer(0)) }
            guard version <= schemaVersion else {
                throw StoreError(.storeUnavailable, "the registry '\(database.path)' has schema version \(version); this pushworker knows up to \(schemaVersion): upgrade pushworker")
            }
            for step in version..<schemaVersion {
                for statement in Self.migrations[step] { try database.execute(statement) }
                try database.execute("INSERT INTO schema_version(version) VALUES (\(step + 1))")
            }
            var violations = 0
            try database.prepare("PRAGMA foreign_key_check").run([]) { _ in violations += 1 }
            guard violations == 0 else {
                throw StoreError(.storeUnavailable, "the registry '\(database.path)' has \(violations) rows whose references are broken; nothing was migrated")
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
        // 2: clustered on their keys (WITHOUT ROWID) and a covering index from user to device, so
        // resolving a member costs two index seeks (device, preferences) instead of four.
        [
            "CREATE TABLE users_v2 (id TEXT PRIMARY KEY, whitelist TEXT NOT NULL DEFAULT '{}', blacklist TEXT NOT NULL DEFAULT '{}') WITHOUT ROWID",
            "INSERT INTO users_v2 SELECT id, whitelist, blacklist FROM users",
            "CREATE TABLE groups_v2 (name TEXT PRIMARY KEY) WITHOUT ROWID",
            "INSERT INTO groups_v2 SELECT name FROM groups",
            """
            CREATE TABLE devices_v2 (app TEXT NOT NULL, token TEXT NOT NULL,
              user_id TEXT REFERENCES users(id) ON DELETE SET NULL,
              registered_at REAL NOT NULL, invalid INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (app, token)) WITHOUT ROWID
            """,
            "INSERT INTO devices_v2 SELECT app, token, user_id, registered_at, invalid FROM devices",
            """
            CREATE TABLE memberships_v2 (group_name TEXT NOT NULL REFERENCES groups(name) ON DELETE CASCADE,
              user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, PRIMARY KEY (group_name, user_id)) WITHOUT ROWID
            """,
            "INSERT INTO memberships_v2 SELECT group_name, user_id FROM memberships",
            "DROP TABLE memberships", "DROP TABLE devices", "DROP TABLE groups", "DROP TABLE users",
            "ALTER TABLE users_v2 RENAME TO users", "ALTER TABLE groups_v2 RENAME TO groups",
            "ALTER TABLE devices_v2 RENAME TO devices", "ALTER TABLE memberships_v2 RENAME TO memberships",
            "CREATE INDEX devices_by_user ON devices(user_id, app, invalid)",
            "CREATE INDEX memberships_by_user ON memberships(user_id)",
        ],
        // 3: preferences per app for a user, and a device's own (NULL: none) for devices with no user.
        [
            "ALTER TABLE devices ADD COLUMN whitelist TEXT",
            "ALTER TABLE devices ADD COLUMN blacklist TEXT",
            // The badge counter, and the job that last raised it (a job raises it once).
            "ALTER TABLE devices ADD COLUMN badge INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE devices ADD COLUMN badge_job TEXT",
            """
            CREATE TABLE app_preferences (user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, app TEXT NOT NULL,
              whitelist TEXT NOT NULL DEFAULT '{}', blacklist TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (user_id, app)) WITHOUT ROWID
            """,
        ],
        // 4: time zones (a user's, a device's own) and quiet hours (a user's, and per app in a
        // table of their own: a row in app_preferences would replace the user's lists).
        [
            "ALTER TABLE users ADD COLUMN time_zone TEXT",
            "ALTER TABLE users ADD COLUMN quiet_hours TEXT",
            "ALTER TABLE devices ADD COLUMN time_zone TEXT",
            """
            CREATE TABLE app_quiet_hours (user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, app TEXT NOT NULL,
              quiet_hours TEXT NOT NULL, PRIMARY KEY (user_id, app)) WITHOUT ROWID
            """,
        ],
        // 5: the service a device is reached through; every device registered before is an APNs one.
        [
            "ALTER TABLE devices ADD COLUMN platform TEXT NOT NULL DEFAULT 'apns'",
        ],
    ]

    public func apply(batch commands: [RegistryCommand]) async throws(StoreError) {
        let now = Date().timeIntervalSince1970
        try state.withLock { (connection: inout Connection) throws(StoreError) in
            let c = connection
            try c.database.transaction { () throws(StoreError) in
                for command in commands { try Self.apply(command, on: c, now: now) }
            }
        }
    }

    private static func apply(_ command: RegistryCommand, on c: Connection, now: Double) throws(StoreError) {
        switch command {
        case .registerDevice(let app, let token, let user, let platform):
            if let user { try c.ensureUser.run([.text(user)]) }
            try c.upsertDevice.run([.text(app), .text(token), user.map { .text($0) } ?? .null, .real(now), .text(platform.rawValue)])
        case .unregisterDevice(let app, let token):
            try c.deleteDevice.run([.text(app), .text(token)])
        case .connect(let app, let token, let user):
            try c.ensureUser.run([.text(user)])
            try c.connectDevice.run([.text(app), .text(token), .text(user), .real(now), .text(DevicePlatform(ofToken: token).rawValue)])
        case .disconnect(let app, let token, let user):
            try c.disconnectDevice.run([.text(app), .text(token), .text(user)])
        case .addToGroup(let user, let group, let createGroup):
            if createGroup {
                try c.ensureGroup.run([.text(group)])
            } else {
                var exists = false
                try c.groupExists.run([.text(group)]) { _ in exists = true }
                guard exists else { throw StoreError(.unknownGroup, field: "group", "group '\(group)' does not exist, and create_group is false") }
            }
            try c.ensureUser.run([.text(user)])
            try c.addMembership.run([.text(group), .text(user)])
        case .removeFromGroup(let user, let group):
            try c.removeMembership.run([.text(group), .text(user)])
        case .setPreferences(let scope, let preferences):
            try write(preferences, for: scope, on: c)
        case .editPreferences(let scope, let edit):
            try write(edit.applied(to: try read(scope, on: c) ?? .none), for: scope, on: c)
        case .deleteUser(let user):
            try c.disconnectUserDevices.run([.text(user)])
            try c.deleteUser.run([.text(user)])
        case .replaceToken(let app, let old, let new):
            try c.takeOver.run([.text(app), .text(old), .text(new), .real(now), .text(DevicePlatform(ofToken: new).rawValue)])
            if old != new {
                try c.moveBadge.run([.text(app), .text(old), .text(new)])
                try c.deleteDevice.run([.text(app), .text(old)])
            }
        case .resetBadge(.device(let app, let token)):
            try c.resetDeviceBadge.run([.text(app), .text(token)])
        case .resetBadge(.user(let user, let app)):
            try c.resetUserBadges.run([.text(user), app.map { .text($0) } ?? .null])
        case .registerLiveActivityToken(let app, let namespace, let token, let user):
            try apply(.registerDevice(app: namespace.registryApp(app), token: token, user: user, platform: .apns), on: c, now: now)
        case .unregisterLiveActivityToken(let app, let namespace, let token):
            try c.deleteDevice.run([.text(namespace.registryApp(app)), .text(token)])
        case .endActivity(let app, let activity):
            try c.deleteApp.run([.text(TokenNamespace.activity(activity).registryApp(app))])
        case .setTimeZone(.device(let app, let token), let zone):
            try c.setDeviceZone.run([.text(app), .text(token), zone.map { .text($0) } ?? .null])
            guard c.database.changes > 0 else { throw StoreError.unknownDevice(app: app, token: token) }
        case .setTimeZone(.user(let user), let zone), .setTimeZone(.userApp(let user, _), let zone):
            try c.ensureUser.run([.text(user)])
            try c.setUserZone.run([.text(user), zone.map { .text($0) } ?? .null])
        case .setQuietHours(.userApp(let user, let app), let window):
            try c.ensureUser.run([.text(user)])
            if let window { try c.setAppQuiet.run([.text(user), .text(app), .text(window.stored)]) } else { try c.deleteAppQuiet.run([.text(user), .text(app)]) }
        case .setQuietHours(.device, _):
            throw StoreError(.invalidField, field: "token", "quiet hours are a user's, not a device's")
        case .setQuietHours(.user(let user), let window):
            try c.ensureUser.run([.text(user)])
            try c.setUserQuiet.run([.text(user), window.map { .text($0.stored) } ?? .null])
        }
    }

    /// The preferences kept at `scope` (nil: none set, or no such user); a device that is not
    /// registered is `unknown_device`.
    private static func read(_ scope: PreferenceScope, on c: Connection) throws(StoreError) -> NotificationPreferences? {
        var found: NotificationPreferences?
        var exists = false
        func take(_ row: SQLiteStatement.Row) {
            exists = true
            guard let whitelist = row.text(0), let blacklist = row.text(1) else { return }
            found = NotificationPreferences(whitelist: PreferencesDecoder.exceptions(whitelist), blacklist: PreferencesDecoder.exceptions(blacklist))
        }
        switch scope {
        case .user(let user): try c.findUser.run([.text(user)]) { take($0) }
        case .userApp(let user, let app): try c.findAppPreferences.run([.text(user), .text(app)]) { take($0) }
        case .device(let app, let token):
            try c.findDevicePreferences.run([.text(app), .text(token)]) { take($0) }
            guard exists else { throw StoreError.unknownDevice(app: app, token: token) }
        }
        return found
    }

    private static func write(_ preferences: NotificationPreferences, for scope: PreferenceScope, on c: Connection) throws(StoreError) {
        let whitelist = PreferencesDecoder.encode(preferences.whitelist), blacklist = PreferencesDecoder.encode(preferences.blacklist)
        switch scope {
        case .user(let user):
            try c.ensureUser.run([.text(user)])
            try c.setPreferences.run([.text(user), .text(whitelist), .text(blacklist)])
        case .userApp(let user, let app):
            try c.ensureUser.run([.text(user)])
            // An empty set for one app is no set: the user's app-wide preferences apply again.
            if preferences == .none {
                try c.deleteAppPreferences.run([.text(user), .text(app)])
            } else {
                try c.setAppPreferences.run([.text(user), .text(app), .text(whitelist), .text(blacklist)])
            }
        case .device(let app, let token):
            let none = preferences == .none
            try c.setDevicePreferences.run([.text(app), .text(token), none ? .null : .text(whitelist), none ? .null : .text(blacklist)])
            guard c.database.changes > 0 else { throw StoreError.unknownDevice(app: app, token: token) }
        }
    }

    public func incrementBadges(app: String, tokens: [String], by amount: Int, job: String) async throws(StoreError) -> [String: Int] {
        guard !tokens.isEmpty else { return [:] }
        let list = Self.json(tokens)
        return try state.withLock { (connection: inout Connection) throws(StoreError) -> [String: Int] in
            var counts: [String: Int] = [:]
            try connection.incrementBadges.run([.text(app), .text(list), .text(job), .integer(Int64(amount))]) { row in
                if let token = row.text(0) { counts[token] = Int(row.integer(1)) }
            }
            return counts
        }
    }

    public func badgeCount(app: String, token: String) async throws(StoreError) -> Int? {
        try state.withLock { (connection: inout Connection) throws(StoreError) -> Int? in
            var count: Int?
            try connection.findBadge.run([.text(app), .text(token)]) { row in count = Int(row.integer(0)) }
            return count
        }
    }

    public func timing(app: String, tokens: [String], preferencesApp: String) async throws(StoreError) -> [String: DeviceTiming] {
        guard !tokens.isEmpty else { return [:] }
        return try state.withLock { connection throws(StoreError) in
            var found: [String: DeviceTiming] = [:]
            try connection.timingOfTokens.run([.text(app), .text(Self.json(tokens)), .text(preferencesApp)]) { row in
                guard let token = row.text(0) else { return }
                found[token] = DeviceTiming(zone: row.text(1), quietHours: QuietHours(stored: row.text(2)))
            }
            return found
        }
    }

    public func timing(_ scope: PreferenceScope) async throws(StoreError) -> DeviceTiming {
        try state.withLock { connection throws(StoreError) in
            var timing = DeviceTiming()
            switch scope {
            case .user(let user):
                try connection.userTiming.run([.text(user)]) { row in timing = DeviceTiming(zone: row.text(0), quietHours: QuietHours(stored: row.text(1))) }
            case .userApp(let user, let app):
                try connection.userAppTiming.run([.text(user), .text(app)]) { row in timing.quietHours = QuietHours(stored: row.text(0)) }
            case .device(let app, let token):
                var exists = false
                try connection.deviceTiming.run([.text(app), .text(token)]) { row in
                    exists = true
                    timing.zone = row.text(0)
                }
                guard exists else { throw StoreError.unknownDevice(app: app, token: token) }
            }
            return timing
        }
    }

    public func preferences(_ scope: PreferenceScope) async throws(StoreError) -> NotificationPreferences? {
        try state.withLock { (connection: inout Connection) throws(StoreError) -> NotificationPreferences? in
            try Self.read(scope, on: connection)
        }
    }

    public func withAudience(
        app: String, users: [String], groups: [String], _ body: (any RegistryAudience) async throws -> Void
    ) async throws {
        try await withSnapshot({ SQLiteAudience(reader: $0, app: app, users: users, groups: groups) }, body)
    }

    public func withAllDevices(app: String, _ body: (any RegistryAudience) async throws -> Void) async throws {
        try await withSnapshot({ SQLiteAudience(reader: $0, everyDeviceOf: app) }, body)
    }

    /// Runs `body` on an audience read by a pooled reader inside one read transaction.
    private func withSnapshot(
        _ audience: (SQLiteAudience.Reader) -> SQLiteAudience, _ body: (any RegistryAudience) async throws -> Void
    ) async throws {
        let reader = try readers.withLock { $0.popLast() } ?? SQLiteAudience.Reader(path: path)
        // A deferred transaction: its first read fixes the snapshot every later read sees.
        try reader.database.execute("BEGIN")
        do {
            try await body(audience(reader))
        } catch {
            try? reader.database.execute("ROLLBACK")
            giveBack(reader)
            throw error
        }
        try? reader.database.execute("COMMIT")
        giveBack(reader)
    }

    /// Back to the pool, or closed (on release) when enough are idle.
    private func giveBack(_ reader: SQLiteAudience.Reader) {
        readers.withLock { idle in
            if idle.count < Self.maxIdleReaders { idle.append(reader) }
        }
    }

    /// Reader connections open and idle now.
    var idleReaders: Int { readers.withLock { $0.count } }

    public func devices(app: String, tokens: [String]) async throws(StoreError) -> [String: RegisteredDevice] {
        guard !tokens.isEmpty else { return [:] }
        // One token (a one-device job) is compared as itself: a list's JSON text, its json_each
        // and the IN's table cost that lookup a third of its time.
        let list = tokens.count == 1 ? tokens[0] : Self.json(tokens)
        return try state.withLock { (connection: inout Connection) throws(StoreError) in
            var devices: [String: RegisteredDevice] = [:]
            var decoder = PreferencesDecoder()
            let statement = tokens.count == 1 ? connection.devicesOfToken : connection.devicesOfTokens
            try statement.run([.text(app), .text(list), .text(TokenNamespace.preferencesApp(app))]) { row in
                guard let token = row.text(0) else { return }
                devices[token] = RegisteredDevice(
                    token: token, user: row.text(1), preferences: decoder.decode(whitelist: row.text(2), blacklist: row.text(3)), platform: row.platform(4))
            }
            return devices
        }
    }

    @discardableResult
    public func deviceRejected(app: String, token: String, reason: APNsErrorReason, at timestamp: Date?) async throws(StoreError) -> Bool {
        try state.withLock { (connection: inout Connection) throws(StoreError) -> Bool in
            switch reason.deviceFate {
            case .gone:
                // Registered again after APNs last saw the token valid: the app still has it.
                let cutoff = (timestamp ?? Date()).timeIntervalSince1970
                try connection.removeUnless.run([.text(app), .text(token), .real(cutoff)])
            case .invalid:
                try connection.markInvalid.run([.text(app), .text(token)])
            case nil:
                return false
            }
            return connection.database.changes > 0
        }
    }

    public func device(app: String, token: String) async throws(StoreError) -> RegisteredDevice? {
        try state.withLock { (connection: inout Connection) throws(StoreError) -> RegisteredDevice? in
            var found: RegisteredDevice?
            var decoder = PreferencesDecoder()
            try connection.findDevice.run([.text(app), .text(token), .text(TokenNamespace.preferencesApp(app))]) { row in
                found = RegisteredDevice(
                    token: row.text(0) ?? "", user: row.text(1), preferences: decoder.decode(whitelist: row.text(2), blacklist: row.text(3)), platform: row.platform(4))
            }
            return found
        }
    }

    public func user(_ id: String) async throws(StoreError) -> RegisteredUser? {
        try state.withLock { (connection: inout Connection) throws(StoreError) -> RegisteredUser? in
            var preferences: NotificationPreferences?
            try connection.findUser.run([.text(id)]) { row in
                preferences = NotificationPreferences(
                    whitelist: PreferencesDecoder.exceptions(row.text(0) ?? "{}"), blacklist: PreferencesDecoder.exceptions(row.text(1) ?? "{}"))
            }
            guard let preferences else { return nil }
            var devices: [RegisteredUser.Device] = []
            try connection.userDevices.run([.text(id)]) { row in
                devices.append(.init(registryApp: row.text(0) ?? "", token: row.text(1) ?? "", invalid: row.integer(2) != 0))
            }
            var groups: [String] = []
            try connection.userGroups.run([.text(id)]) { row in groups.append(row.text(0) ?? "") }
            return RegisteredUser(id: id, devices: devices, groups: groups, preferences: preferences)
        }
    }

    public func group(_ name: String, sampleSize: Int) async throws(StoreError) -> RegisteredGroup? {
        try state.withLock { (connection: inout Connection) throws(StoreError) -> RegisteredGroup? in
            var members: Int?
            try connection.groupMembers.run([.text(name)]) { row in members = Int(row.integer(0)) }
            guard let members else { return nil }
            var devices: [String: Int] = [:]
            try connection.groupDevices.run([.text(name)]) { row in devices[row.text(0) ?? ""] = Int(row.integer(1)) }
            var sample: [String] = []
            try connection.groupSample.run([.text(name), .integer(Int64(sampleSize))]) { row in sample.append(row.text(0) ?? "") }
            return RegisteredGroup(name: name, members: members, devicesByApp: devices, sample: sample)
        }
    }

    /// A list bound as one parameter, read by `json_each`.
    static func json(_ strings: [String]) -> String {
        JSONText.list(strings)
    }
}
