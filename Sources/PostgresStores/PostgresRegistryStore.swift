import APNs
import Foundation
import Logging
import PostgresNIO
import Stores
import Synchronization

/// The registry on PostgreSQL, for workers on many hosts: the SQLite store's schema, migrations
/// and rules, over postgres-nio's connection pool. Every statement binds its values (the
/// extended protocol), none is built from them.
public final class PostgresRegistryStore: RegistryStore, PostgresBacked {
    /// The schema this build writes; older databases are migrated up to it on open.
    public static let schemaVersion = 5

    let database: PostgresDatabase
    /// The delivery ledger and the schedule in the same database, over the same connections.
    public let ledger: PostgresLedgerStore
    public let schedule: PostgresScheduleStore
    /// Its connections; a service of the worker's group.
    public var pool: PostgresPool { database.pool }
    /// The URL without its password, for messages.
    public var redactedURL: String { database.redactedURL }
    private var client: PostgresClient { database.pool.client }
    /// The device lookups of one-device jobs in flight, asked together (`devices(app:tokens:)`).
    private let deviceLookups: LookupCoalescer<String, RegisteredDevice>

    /// Connects (the pool runs until the store is released) and creates or migrates the schema.
    /// A server that does not answer within `connectTimeout` fails the start: the pool itself
    /// would wait for it forever.
    /// - Parameter holdsConnections: a worker's store: its pool opens `maximumConnections` at once,
    ///   keeps them, and keeps them alive itself (see `PostgresPool`). A command's store opens what
    ///   it uses.
    public init(
        url: String, maximumConnections: Int = 8, holdsConnections: Bool = false, keepAliveInterval: Duration = PostgresPool.keepAliveInterval,
        connectTimeout: Duration = .seconds(30), logger: Logger
    ) async throws(StoreError) {
        let (configuration, redacted) = try Self.configuration(url: url, maximumConnections: maximumConnections)
        let pool = PostgresPool(configuration: configuration, holdsConnections: holdsConnections, keepAliveInterval: keepAliveInterval, logger: logger)
        database = PostgresDatabase(pool: pool, logger: logger, redactedURL: redacted)
        ledger = PostgresLedgerStore(database: database)
        schedule = PostgresScheduleStore(database: database)
        deviceLookups = LookupCoalescer { [database] app, tokens throws(StoreError) in try await Self.devices(app: app, tokens: tokens, in: database) }
        // Only reaching the server is timed: a migration (an index over many devices, or waiting
        // for another worker's) takes what it takes.
        let outcome: Result<Void, StoreError>? = await withTaskGroup(of: Result<Void, StoreError>?.self) { group in
            group.addTask { [self] in
                do throws(StoreError) {
                    _ = try await self.read { connection in try await connection.query("SELECT 1", logger: self.logger) ; return 1 }
                } catch {
                    return .failure(error)
                }
                return .success(())
            }
            group.addTask {
                try? await Task.sleep(for: connectTimeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch outcome {
        case .success:
            do {
                try await migrate()
            } catch {
                pool.cancel()
                throw error
            }
        case .failure(let error):
            pool.cancel()
            throw error
        case nil:
            pool.cancel()
            throw StoreError(.storeUnavailable, "no PostgreSQL answered at \(redacted) within \(connectTimeout)")
        }
    }

    /// Checks a URL as opening the store would, without connecting; the URL with its password
    /// masked (for `pushworker config check`).
    public static func redacted(checking url: String) throws(StoreError) -> String {
        try configuration(url: url, maximumConnections: 1).1
    }

    /// `postgres://user[:password]@host[:port]/database[?sslmode=disable|prefer|require]`.
    static func configuration(url: String, maximumConnections: Int) throws(StoreError) -> (PostgresClient.Configuration, String) {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
            let host = components.host, !host.isEmpty
        else {
            throw StoreError(.storeUnavailable, field: "registry.postgres", "registry.postgres must be a URL like postgres://user:password@host:5432/database")
        }
        var redacted = components
        if redacted.password != nil { redacted.password = "***" }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        if let unknown = components.queryItems?.first(where: { $0.name != "sslmode" }) {
            throw StoreError(.storeUnavailable, field: "registry.postgres", "registry.postgres: parameter '\(unknown.name)' is not supported (only sslmode; the password goes before the host)")
        }
        // As libpq: prefer and require encrypt without checking the server's certificate;
        // verify-full checks it against the system's CAs and the host name.
        var unverified = TLSConfiguration.makeClientConfiguration()
        unverified.certificateVerification = .none
        let tls: PostgresClient.Configuration.TLS
        switch components.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer" {
        case "disable": tls = .disable
        case "prefer": tls = .prefer(unverified)
        case "require": tls = .require(unverified)
        case "verify-full": tls = .require(.makeClientConfiguration())
        case let mode:
            throw StoreError(.storeUnavailable, field: "registry.postgres", "sslmode '\(mode)' is not disable, prefer, require or verify-full")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
            database: database.isEmpty ? nil : database, tls: tls)
        configuration.options.maximumConnections = max(1, maximumConnections)
        return (configuration, redacted.string ?? "postgres://…")
    }

    // MARK: Schema

    private func migrate() async throws(StoreError) {
        try await transaction { connection in
            // Workers starting together migrate one at a time.
            try await connection.query("SELECT pg_advisory_xact_lock(7245310)", logger: self.logger)
            try await connection.query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", logger: self.logger)
            var version = 0
            for try await (found) in try await connection.query("SELECT COALESCE(MAX(version), 0) FROM schema_version", logger: self.logger).decode(Int.self) {
                version = found
            }
            guard version <= Self.schemaVersion else {
                throw StoreError(.storeUnavailable, "the registry \(self.redactedURL) has schema version \(version); this pushworker knows up to \(Self.schemaVersion): upgrade pushworker")
            }
            for step in version..<Self.schemaVersion {
                for statement in Self.migrations[step] { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger) }
                try await connection.query("INSERT INTO schema_version(version) VALUES (\(step + 1))", logger: self.logger)
            }
        }
    }

    /// Migration n brings the schema from version n to n + 1: the SQLite store's tables.
    static let migrations: [[String]] = [
        [
            "CREATE TABLE users (id TEXT PRIMARY KEY, whitelist TEXT NOT NULL DEFAULT '{}', blacklist TEXT NOT NULL DEFAULT '{}')",
            "CREATE TABLE groups (name TEXT PRIMARY KEY)",
            """
            CREATE TABLE devices (app TEXT NOT NULL, token TEXT NOT NULL,
              user_id TEXT REFERENCES users(id) ON DELETE SET NULL,
              registered_at DOUBLE PRECISION NOT NULL, invalid BOOLEAN NOT NULL DEFAULT false, PRIMARY KEY (app, token))
            """,
            "CREATE INDEX devices_by_user ON devices(user_id, app)",
            """
            CREATE TABLE memberships (group_name TEXT NOT NULL REFERENCES groups(name) ON DELETE CASCADE,
              user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, PRIMARY KEY (group_name, user_id))
            """,
            "CREATE INDEX memberships_by_user ON memberships(user_id)",
        ],
        // 2: the SQLite store's version 2 clusters its tables; here the index from user to device
        // covers what resolution reads, for index-only scans.
        [
            "DROP INDEX devices_by_user",
            "CREATE INDEX devices_by_user ON devices(user_id, app) INCLUDE (token, invalid)",
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
              whitelist TEXT NOT NULL DEFAULT '{}', blacklist TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (user_id, app))
            """,
        ],
        // 4: time zones (a user's, a device's own) and quiet hours (a user's, and per app).
        [
            "ALTER TABLE users ADD COLUMN time_zone TEXT",
            "ALTER TABLE users ADD COLUMN quiet_hours TEXT",
            "ALTER TABLE devices ADD COLUMN time_zone TEXT",
            """
            CREATE TABLE app_quiet_hours (user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, app TEXT NOT NULL,
              quiet_hours TEXT NOT NULL, PRIMARY KEY (user_id, app))
            """,
        ],
        // 5: the service a device is reached through; every device registered before is an APNs
        // one (a constant default: no table rewrite).
        [
            "ALTER TABLE devices ADD COLUMN platform TEXT NOT NULL DEFAULT 'apns'",
        ],
    ]

    // MARK: Commands

    public func apply(batch commands: [RegistryCommand]) async throws(StoreError) {
        let now = Date().timeIntervalSince1970
        try await transaction { connection in
            for command in commands { try await self.apply(command, on: connection, now: now) }
        }
    }

    private func apply(_ command: RegistryCommand, on connection: PostgresConnection, now: Double) async throws {
        func run(_ query: PostgresQuery) async throws { try await connection.query(query, logger: logger) }
        func ensureUser(_ user: String) async throws { try await run("INSERT INTO users(id) VALUES (\(user)) ON CONFLICT (id) DO NOTHING") }
        switch command {
        case .registerDevice(let app, let token, let user, let platform):
            if let user { try await ensureUser(user) }
            try await run("""
                INSERT INTO devices(app, token, user_id, registered_at, invalid, platform) VALUES (\(app), \(token), \(user), \(now), false, \(platform.rawValue))
                ON CONFLICT (app, token) DO UPDATE SET registered_at = excluded.registered_at, invalid = false,
                  user_id = COALESCE(excluded.user_id, devices.user_id), platform = excluded.platform
                """)
        case .unregisterDevice(let app, let token):
            try await run("DELETE FROM devices WHERE app = \(app) AND token = \(token)")
        case .connect(let app, let token, let user):
            try await ensureUser(user)
            try await run("""
                INSERT INTO devices(app, token, user_id, registered_at, invalid, platform)
                VALUES (\(app), \(token), \(user), \(now), false, \(DevicePlatform(ofToken: token).rawValue))
                ON CONFLICT (app, token) DO UPDATE SET user_id = excluded.user_id
                """)
        case .disconnect(let app, let token, let user):
            try await run("UPDATE devices SET user_id = NULL WHERE app = \(app) AND token = \(token) AND user_id = \(user)")
        case .addToGroup(let user, let group, let createGroup):
            if createGroup {
                try await run("INSERT INTO groups(name) VALUES (\(group)) ON CONFLICT (name) DO NOTHING")
            } else {
                var exists = false
                for try await _ in try await connection.query("SELECT 1 FROM groups WHERE name = \(group)", logger: logger) { exists = true }
                guard exists else { throw StoreError(.unknownGroup, field: "group", "group '\(group)' does not exist, and create_group is false") }
            }
            try await ensureUser(user)
            try await run("INSERT INTO memberships(group_name, user_id) VALUES (\(group), \(user)) ON CONFLICT DO NOTHING")
        case .removeFromGroup(let user, let group):
            try await run("DELETE FROM memberships WHERE group_name = \(group) AND user_id = \(user)")
        case .setPreferences(let scope, let preferences):
            try await write(preferences, for: scope, on: connection)
        case .editPreferences(let scope, let edit):
            // Locked first (as `write` locks for a set): two changes of one set at once each see
            // the other's result.
            if case .user(let user) = scope { try await lockUser(user, on: connection) }
            if case .userApp(let user, _) = scope { try await lockUser(user, on: connection) }
            let current = try await read(scope, on: connection, locking: true)
            try await write(edit.applied(to: current ?? .none), for: scope, on: connection)
        case .deleteUser(let user):
            try await run("UPDATE devices SET user_id = NULL WHERE user_id = \(user)")
            try await run("DELETE FROM users WHERE id = \(user)")
        case .replaceToken(let app, let old, let new):
            // The new token takes the old one's user and preferences (what the new one already has
            // stays where the old had none).
            try await run("""
                INSERT INTO devices(app, token, user_id, registered_at, invalid, whitelist, blacklist, platform)
                  SELECT \(app), \(new), o.user_id, \(now), false, o.whitelist, o.blacklist, \(DevicePlatform(ofToken: new).rawValue)
                  FROM (SELECT 1) one LEFT JOIN devices o ON o.app = \(app) AND o.token = \(old)
                ON CONFLICT (app, token) DO UPDATE SET registered_at = excluded.registered_at, invalid = false,
                  user_id = COALESCE(excluded.user_id, devices.user_id),
                  whitelist = COALESCE(excluded.whitelist, devices.whitelist), blacklist = COALESCE(excluded.blacklist, devices.blacklist)
                """)
            if old != new {
                try await run("""
                    UPDATE devices n SET badge = o.badge, badge_job = o.badge_job FROM devices o
                    WHERE n.app = \(app) AND n.token = \(new) AND o.app = \(app) AND o.token = \(old)
                    """)
                try await run("DELETE FROM devices WHERE app = \(app) AND token = \(old)")
            }
        case .resetBadge(.device(let app, let token)):
            try await run("UPDATE devices SET badge = 0 WHERE app = \(app) AND token = \(token)")
        case .resetBadge(.user(let user, let app)):
            if let app {
                try await run("UPDATE devices SET badge = 0 WHERE user_id = \(user) AND app = \(app)")
            } else {
                try await run("UPDATE devices SET badge = 0 WHERE user_id = \(user)")
            }
        case .registerLiveActivityToken(let app, let namespace, let token, let user):
            try await apply(.registerDevice(app: namespace.registryApp(app), token: token, user: user, platform: .apns), on: connection, now: now)
        case .unregisterLiveActivityToken(let app, let namespace, let token):
            try await run("DELETE FROM devices WHERE app = \(namespace.registryApp(app)) AND token = \(token)")
        case .endActivity(let app, let activity):
            try await run("DELETE FROM devices WHERE app = \(TokenNamespace.activity(activity).registryApp(app))")
        case .setTimeZone(.device(let app, let token), let zone):
            var found = false
            for try await _ in try await connection.query(
                "UPDATE devices SET time_zone = \(zone) WHERE app = \(app) AND token = \(token) RETURNING 1", logger: logger) { found = true }
            guard found else { throw StoreError.unknownDevice(app: app, token: token) }
        case .setTimeZone(.user(let user), let zone), .setTimeZone(.userApp(let user, _), let zone):
            try await ensureUser(user)
            try await run("UPDATE users SET time_zone = \(zone) WHERE id = \(user)")
        case .setQuietHours(.userApp(let user, let app), let window):
            try await ensureUser(user)
            if let window {
                try await run("""
                    INSERT INTO app_quiet_hours(user_id, app, quiet_hours) VALUES (\(user), \(app), \(window.stored))
                    ON CONFLICT (user_id, app) DO UPDATE SET quiet_hours = excluded.quiet_hours
                    """)
            } else {
                try await run("DELETE FROM app_quiet_hours WHERE user_id = \(user) AND app = \(app)")
            }
        case .setQuietHours(.device, _):
            throw StoreError(.invalidField, field: "token", "quiet hours are a user's, not a device's")
        case .setQuietHours(.user(let user), let window):
            try await ensureUser(user)
            try await run("UPDATE users SET quiet_hours = \(window?.stored) WHERE id = \(user)")
        }
    }

    /// Creates the user if needed and locks their row until the transaction ends: every change of
    /// a user's preference sets takes it, so a set and an edit of one user never interleave.
    private func lockUser(_ user: String, on connection: PostgresConnection) async throws {
        try await connection.query("INSERT INTO users(id) VALUES (\(user)) ON CONFLICT (id) DO NOTHING", logger: logger)
        try await connection.query("SELECT 1 FROM users WHERE id = \(user) FOR UPDATE", logger: logger)
    }

    /// The preferences kept at `scope`; nil when none are set or the user is unknown.
    private func read(_ scope: PreferenceScope, on connection: PostgresConnection, locking: Bool = false) async throws -> NotificationPreferences? {
        let query: PostgresQuery
        switch scope {
        case .user(let user): query = "SELECT whitelist, blacklist FROM users WHERE id = \(user)"
        case .userApp(let user, let app): query = "SELECT whitelist, blacklist FROM app_preferences WHERE user_id = \(user) AND app = \(app)"
        case .device(let app, let token):
            query = locking
                ? "SELECT whitelist, blacklist FROM devices WHERE app = \(app) AND token = \(token) FOR UPDATE"
                : "SELECT whitelist, blacklist FROM devices WHERE app = \(app) AND token = \(token)"
        }
        var exists = false
        var found: NotificationPreferences?
        for try await (whitelist, blacklist) in try await connection.query(query, logger: logger).decode((String?, String?).self) {
            exists = true
            if let whitelist, let blacklist {
                found = NotificationPreferences(whitelist: PreferencesDecoder.exceptions(whitelist), blacklist: PreferencesDecoder.exceptions(blacklist))
            }
        }
        if case .device(let app, let token) = scope, !exists { throw StoreError.unknownDevice(app: app, token: token) }
        return found
    }

    private func write(_ preferences: NotificationPreferences, for scope: PreferenceScope, on connection: PostgresConnection) async throws {
        let whitelist = PreferencesDecoder.encode(preferences.whitelist), blacklist = PreferencesDecoder.encode(preferences.blacklist)
        func run(_ query: PostgresQuery) async throws { try await connection.query(query, logger: logger) }
        switch scope {
        case .user(let user):
            try await lockUser(user, on: connection)
            try await run("UPDATE users SET whitelist = \(whitelist), blacklist = \(blacklist) WHERE id = \(user)")
        case .userApp(let user, let app):
            try await lockUser(user, on: connection)
            // An empty set for one app is no set: the user's app-wide preferences apply again.
            if preferences == .none {
                try await run("DELETE FROM app_preferences WHERE user_id = \(user) AND app = \(app)")
            } else {
                try await run("""
                    INSERT INTO app_preferences(user_id, app, whitelist, blacklist) VALUES (\(user), \(app), \(whitelist), \(blacklist))
                    ON CONFLICT (user_id, app) DO UPDATE SET whitelist = excluded.whitelist, blacklist = excluded.blacklist
                    """)
            }
        case .device(let app, let token):
            let none = preferences == .none
            let rows = try await connection.query("""
                UPDATE devices SET whitelist = \(none ? nil : whitelist), blacklist = \(none ? nil : blacklist)
                WHERE app = \(app) AND token = \(token) RETURNING token
                """, logger: logger)
            var changed = false
            for try await _ in rows { changed = true }
            guard changed else { throw StoreError.unknownDevice(app: app, token: token) }
        }
    }

    public func incrementBadges(app: String, tokens: [String], by amount: Int, job: String) async throws(StoreError) -> [String: Int] {
        guard !tokens.isEmpty else { return [:] }
        let counts = Mutex<[String: Int]>([:])
        // Row locks serialise increments of one device; a deadlock between two jobs' overlapping
        // devices is retried by `transaction`.
        try await transaction { connection in
            var found: [String: Int] = [:]
            let rows = try await connection.query("""
                UPDATE devices SET badge = CASE WHEN badge_job IS NOT DISTINCT FROM \(job) THEN badge ELSE badge + \(amount) END, badge_job = \(job)
                WHERE app = \(app) AND NOT invalid AND token = ANY(\(tokens)) RETURNING token, badge
                """, logger: self.logger)
            for try await (token, badge) in rows.decode((String, Int).self) { found[token] = badge }
            counts.withLock { $0 = found }
        }
        return counts.withLock { $0 }
    }

    public func badgeCount(app: String, token: String) async throws(StoreError) -> Int? {
        try await read { connection in
            var count: Int?
            let rows = try await connection.query(
                "SELECT badge FROM devices WHERE app = \(app) AND token = \(token) AND NOT invalid", logger: self.logger)
            for try await badge in rows.decode(Int.self) { count = badge }
            return count
        }
    }

    public func timing(app: String, tokens: [String], preferencesApp: String) async throws(StoreError) -> [String: DeviceTiming] {
        guard !tokens.isEmpty else { return [:] }
        return try await read { connection in
            var found: [String: DeviceTiming] = [:]
            for try await (token, zone, window) in try await connection.query("""
                SELECT d.token, COALESCE(d.time_zone, u.time_zone), COALESCE(q.quiet_hours, u.quiet_hours) FROM devices d
                LEFT JOIN users u ON u.id = d.user_id LEFT JOIN app_quiet_hours q ON q.user_id = d.user_id AND q.app = \(preferencesApp)
                WHERE d.app = \(app) AND d.token = ANY(\(tokens))
                  AND (d.time_zone IS NOT NULL OR u.time_zone IS NOT NULL OR u.quiet_hours IS NOT NULL OR q.quiet_hours IS NOT NULL)
                """, logger: self.logger).decode((String, String?, String?).self) {
                found[token] = DeviceTiming(zone: zone, quietHours: QuietHours(stored: window))
            }
            return found
        }
    }

    public func timing(_ scope: PreferenceScope) async throws(StoreError) -> DeviceTiming {
        let timing: DeviceTiming? = try await read { connection in
            var timing: DeviceTiming?
            switch scope {
            case .user(let user):
                for try await (zone, window) in try await connection.query(
                    "SELECT time_zone, quiet_hours FROM users WHERE id = \(user)", logger: self.logger).decode((String?, String?).self) {
                    timing = DeviceTiming(zone: zone, quietHours: QuietHours(stored: window))
                }
                return timing ?? DeviceTiming()
            case .userApp(let user, let app):
                for try await window in try await connection.query(
                    "SELECT quiet_hours FROM app_quiet_hours WHERE user_id = \(user) AND app = \(app)", logger: self.logger).decode(String.self) {
                    timing = DeviceTiming(quietHours: QuietHours(stored: window))
                }
                return timing ?? DeviceTiming()
            case .device(let app, let token):
                for try await zone in try await connection.query(
                    "SELECT time_zone FROM devices WHERE app = \(app) AND token = \(token)", logger: self.logger).decode(String?.self) {
                    timing = DeviceTiming(zone: zone)
                }
                return timing
            }
        }
        guard let timing else {
            if case .device(let app, let token) = scope { throw StoreError.unknownDevice(app: app, token: token) }
            return DeviceTiming()
        }
        return timing
    }

    public func preferences(_ scope: PreferenceScope) async throws(StoreError) -> NotificationPreferences? {
        try await read { connection in try await self.read(scope, on: connection) }
    }

    // MARK: Resolution

    public func withAudience(
        app: String, users: [String], groups: [String], _ body: (any RegistryAudience) async throws -> Void
    ) async throws {
        try await withSnapshot(app: app, source: users.isEmpty && groups.count == 1 ? .oneGroup(groups[0]) : .union(users: users, groups: groups), body)
    }

    public func withAllDevices(app: String, _ body: (any RegistryAudience) async throws -> Void) async throws {
        try await withSnapshot(app: app, source: .everyDevice, body)
    }

    /// Runs `body` on an audience read in one snapshot on one leased connection.
    private func withSnapshot(app: String, source: PostgresAudience.Source, _ body: (any RegistryAudience) async throws -> Void) async throws {
        do {
            try await client.withConnection { connection in
                // One snapshot for the count and the pages, however long the pages take.
                try await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: self.logger)
                do {
                    // Compiling these plain joins costs more than it saves.
                    try await connection.query("SET LOCAL jit = off", logger: self.logger)
                    try await body(PostgresAudience(connection: connection, logger: self.logger, app: app, source: source))
                } catch {
                    _ = try? await connection.query("ROLLBACK", logger: self.logger)
                    throw error
                }
                try await connection.query("COMMIT", logger: self.logger)
            }
        } catch let error as PSQLError {
            throw failure(error)
        }
    }

    public func devices(app: String, tokens: [String]) async throws(StoreError) -> [String: RegisteredDevice] {
        guard !tokens.isEmpty else { return [:] }
        // A job of a few devices shares its statement with the jobs in flight beside it; a
        // page of a large audience is a statement of its own.
        guard tokens.count > Self.coalescedLookup else { return try await deviceLookups.values(group: app, items: tokens) }
        return try await Self.devices(app: app, tokens: tokens, in: database)
    }

    /// Lookups of at most this many devices are asked together.
    static let coalescedLookup = 100

    private static func devices(app: String, tokens: [String], in database: PostgresDatabase) async throws(StoreError) -> [String: RegisteredDevice] {
        try await database.read { connection in
            var devices: [String: RegisteredDevice] = [:]
            var decoder = PreferencesDecoder()
            let rows = try await connection.query(Self.devicesOfTokens(app: app, tokens: tokens), logger: database.logger)
            for try await (token, user, whitelist, blacklist, platform) in rows.decode((String, String?, String?, String?, String).self) {
                devices[token] = RegisteredDevice(
                    token: token, user: user, preferences: decoder.decode(whitelist: whitelist, blacklist: blacklist), platform: DevicePlatform(rawValue: platform) ?? .apns)
            }
            return devices
        }
    }

    /// Registered, valid devices of `app` among `tokens` that are connected or have preferences
    /// of their own; users' per-app preferences are those of its base app (`TokenNamespace.preferencesApp`).
    static func devicesOfTokens(app: String, tokens: [String]) -> PostgresQuery {
        """
        SELECT d.token, d.user_id, COALESCE(p.whitelist, u.whitelist, d.whitelist), COALESCE(p.blacklist, u.blacklist, d.blacklist), d.platform
        FROM devices d LEFT JOIN users u ON u.id = d.user_id
        LEFT JOIN app_preferences p ON p.user_id = d.user_id AND p.app = \(TokenNamespace.preferencesApp(app))
        WHERE d.app = \(app) AND NOT d.invalid AND d.token = ANY(\(tokens)) AND (d.user_id IS NOT NULL OR d.whitelist IS NOT NULL)
        """
    }

    @discardableResult
    public func deviceRejected(app: String, token: String, reason: APNsErrorReason, at timestamp: Date?) async throws(StoreError) -> Bool {
        let query: PostgresQuery
        switch reason.deviceFate {
        case .gone:
            // Registered again after APNs last saw the token valid: the app still has it.
            let cutoff = (timestamp ?? Date()).timeIntervalSince1970
            query = "DELETE FROM devices WHERE app = \(app) AND token = \(token) AND registered_at <= \(cutoff) RETURNING token"
        case .invalid:
            query = "UPDATE devices SET invalid = true WHERE app = \(app) AND token = \(token) RETURNING token"
        case nil:
            return false
        }
        return try await read { connection in
            var changed = false
            for try await _ in try await connection.query(query, logger: self.logger) { changed = true }
            return changed
        }
    }

    public func device(app: String, token: String) async throws(StoreError) -> RegisteredDevice? {
        try await read { connection in
            var found: RegisteredDevice?
            var decoder = PreferencesDecoder()
            let rows = try await connection.query("""
                SELECT d.token, d.user_id, COALESCE(p.whitelist, u.whitelist, d.whitelist), COALESCE(p.blacklist, u.blacklist, d.blacklist), d.platform
                FROM devices d LEFT JOIN users u ON u.id = d.user_id
                LEFT JOIN app_preferences p ON p.user_id = d.user_id AND p.app = \(TokenNamespace.preferencesApp(app))
                WHERE d.app = \(app) AND d.token = \(token) AND NOT d.invalid
                """, logger: self.logger)
            for try await (token, user, whitelist, blacklist, platform) in rows.decode((String, String?, String?, String?, String).self) {
                found = RegisteredDevice(
                    token: token, user: user, preferences: decoder.decode(whitelist: whitelist, blacklist: blacklist), platform: DevicePlatform(rawValue: platform) ?? .apns)
            }
            return found
        }
    }

    public func user(_ id: String) async throws(StoreError) -> RegisteredUser? {
        try await read { connection in
            var preferences: NotificationPreferences?
            for try await (whitelist, blacklist) in try await connection.query(
                "SELECT whitelist, blacklist FROM users WHERE id = \(id)", logger: self.logger
            ).decode((String, String).self) {
                preferences = NotificationPreferences(whitelist: PreferencesDecoder.exceptions(whitelist), blacklist: PreferencesDecoder.exceptions(blacklist))
            }
            guard let preferences else { return nil }
            var devices: [RegisteredUser.Device] = []
            for try await (app, token, invalid) in try await connection.query(
                "SELECT app, token, invalid FROM devices WHERE user_id = \(id) ORDER BY app, token", logger: self.logger
            ).decode((String, String, Bool).self) {
                devices.append(.init(registryApp: app, token: token, invalid: invalid))
            }
            var groups: [String] = []
            for try await group in try await connection.query(
                "SELECT group_name FROM memberships WHERE user_id = \(id) ORDER BY group_name", logger: self.logger
            ).decode(String.self) {
                groups.append(group)
            }
            return RegisteredUser(id: id, devices: devices, groups: groups, preferences: preferences)
        }
    }

    public func group(_ name: String, sampleSize: Int) async throws(StoreError) -> RegisteredGroup? {
        try await read { connection in
            var members: Int?
            for try await count in try await connection.query(
                "SELECT (SELECT COUNT(*) FROM memberships WHERE group_name = \(name)) FROM groups WHERE name = \(name)", logger: self.logger
            ).decode(Int.self) {
                members = count
            }
            guard let members else { return nil }
            var devices: [String: Int] = [:]
            for try await (app, count) in try await connection.query("""
                SELECT d.app, COUNT(*) FROM memberships m JOIN devices d ON d.user_id = m.user_id
                WHERE m.group_name = \(name) AND NOT d.invalid GROUP BY d.app
                """, logger: self.logger
            ).decode((String, Int).self) {
                devices[app] = count
            }
            var sample: [String] = []
            for try await user in try await connection.query(
                "SELECT user_id FROM memberships WHERE group_name = \(name) ORDER BY user_id LIMIT \(sampleSize)", logger: self.logger
            ).decode(String.self) {
                sample.append(user)
            }
            return RegisteredGroup(name: name, members: members, devicesByApp: devices, sample: sample)
        }
    }
}
