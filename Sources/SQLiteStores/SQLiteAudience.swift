import CSQLite
import Stores
/// An audience read from SQLite inside one read transaction (WAL: writers go on meanwhile, and
/// this reader keeps seeing the snapshot its first read fixed).
struct SQLiteAudience: RegistryAudience {
    /// A connection of its own with the audience statements prepared. Used by one task at a time:
    /// it is out of the store's pool while an audience is read.
    final class Reader: @unchecked Sendable {
        let database: SQLiteDatabase
        /// One group, no users: the members straight from the group's key range, each once by
        /// that key, nothing to deduplicate.
        let groupCount, groupCountAmong, groupStream: SQLiteStatement
        /// Users and groups: the union of their user ids (a temporary b-tree, which SQLite spills
        /// to disk past its cache), then their devices.
        let count, countAmong, stream: SQLiteStatement
        /// Every device of one app key (a Live Activity's tokens): its primary-key range, users
        /// or none, each device with the preferences `devicesOfTokens` would give it.
        let appCount, appCountAmong, appStream: SQLiteStatement
        let devicesOfTokens: SQLiteStatement

        /// CROSS JOIN keeps the members as the outer loop (SQLite's way of fixing the join order):
        /// left to its statistics, the planner may walk every device of the app instead, which for
        /// a small group in a big app costs the app's size.
        static let members = """
            FROM memberships m CROSS JOIN devices d ON d.user_id = m.user_id AND d.app = ?1 AND d.invalid = 0
            WHERE m.group_name = ?2
            """
        static let union = """
            FROM (SELECT value AS user_id FROM json_each(?2)
                  UNION SELECT user_id FROM memberships WHERE group_name IN (SELECT value FROM json_each(?3))) a
            CROSS JOIN devices d ON d.user_id = a.user_id AND d.app = ?1 AND d.invalid = 0
            """

        /// A member's preferences: theirs for the app, else their app-wide ones.
        static let userPreferences = "COALESCE(p.whitelist, u.whitelist), COALESCE(p.blacklist, u.blacklist)"

        init(path: String) throws(StoreError) {
            database = try SQLiteDatabase(path: path)
            groupCount = try database.prepare("SELECT COUNT(*) \(Self.members)")
            groupCountAmong = try database.prepare("SELECT COUNT(*) \(Self.members) AND d.token IN (SELECT value FROM json_each(?3))")
            groupStream = try database.prepare("""
                SELECT d.token, d.user_id, \(Self.userPreferences), d.platform FROM memberships m
                CROSS JOIN devices d ON d.user_id = m.user_id AND d.app = ?1 AND d.invalid = 0
                CROSS JOIN users u ON u.id = m.user_id LEFT JOIN app_preferences p ON p.user_id = m.user_id AND p.app = ?3
                WHERE m.group_name = ?2
                """)
            count = try database.prepare("SELECT COUNT(*) \(Self.union)")
            countAmong = try database.prepare("SELECT COUNT(*) \(Self.union) WHERE d.token IN (SELECT value FROM json_each(?4))")
            stream = try database.prepare("""
                SELECT d.token, d.user_id, \(Self.userPreferences), d.platform \(Self.union) CROSS JOIN users u ON u.id = a.user_id
                LEFT JOIN app_preferences p ON p.user_id = a.user_id AND p.app = ?4
                """)
            appCount = try database.prepare("SELECT COUNT(*) FROM devices d WHERE d.app = ?1 AND d.invalid = 0")
            appCountAmong = try database.prepare(
                "SELECT COUNT(*) FROM devices d WHERE d.app = ?1 AND d.invalid = 0 AND d.token IN (SELECT value FROM json_each(?2))")
            appStream = try database.prepare("""
                SELECT d.token, d.user_id, \(SQLiteRegistryStore.effectivePreferences), d.platform FROM devices d
                LEFT JOIN users u ON u.id = d.user_id LEFT JOIN app_preferences p ON p.user_id = d.user_id AND p.app = ?2
                WHERE d.app = ?1 AND d.invalid = 0
                """)
            devicesOfTokens = try database.prepare(SQLiteRegistryStore.devicesOfTokens)
        }
    }

    /// Whose devices it reads.
    enum Source {
        /// The members of one group, no users.
        case oneGroup
        /// Users and the members of groups.
        case union
        /// Every device of the app key.
        case everyDevice
    }

    let reader: Reader
    let app: String
    /// Whose users' per-app preferences apply: the base app of a Live Activity namespace.
    let preferencesApp: String
    /// The statements' leading parameters: app and group, or app, users and groups as JSON
    /// arrays, or the app alone.
    let parameters: [SQLiteStatement.Value]
    let source: Source

    init(reader: Reader, app: String, users: [String], groups: [String]) {
        self.reader = reader
        self.app = app
        preferencesApp = TokenNamespace.preferencesApp(app)
        source = users.isEmpty && groups.count == 1 ? .oneGroup : .union
        parameters = source == .oneGroup
            ? [.text(app), .text(groups[0])]
            : [.text(app), .text(SQLiteRegistryStore.json(users)), .text(SQLiteRegistryStore.json(groups))]
    }

    /// Every valid device of `app`, connected or not.
    init(reader: Reader, everyDeviceOf app: String) {
        self.reader = reader
        self.app = app
        preferencesApp = TokenNamespace.preferencesApp(app)
        source = .everyDevice
        parameters = [.text(app)]
    }

    func count() async throws -> Int {
        var count = 0
        let statement = switch source {
        case .oneGroup: reader.groupCount
        case .union: reader.count
        case .everyDevice: reader.appCount
        }
        try statement.run(parameters) { row in count = Int(row.integer(0)) }
        return count
    }

    func count(among tokens: [String]) async throws -> Int {
        guard !tokens.isEmpty else { return 0 }
        var count = 0
        let statement = switch source {
        case .oneGroup: reader.groupCountAmong
        case .union: reader.countAmong
        case .everyDevice: reader.appCountAmong
        }
        try statement.run(parameters + [.text(SQLiteRegistryStore.json(tokens))]) { row in count = Int(row.integer(0)) }
        return count
    }

    func devices(tokens: [String]) async throws -> [String: RegisteredDevice] {
        guard !tokens.isEmpty else { return [:] }
        var devices: [String: RegisteredDevice] = [:]
        var decoder = PreferencesDecoder()
        try reader.devicesOfTokens.run([.text(app), .text(SQLiteRegistryStore.json(tokens)), .text(preferencesApp)]) { row in
            guard let token = row.text(0) else { return }
            devices[token] = RegisteredDevice(
                token: token, user: row.text(1), preferences: decoder.decode(whitelist: row.text(2), blacklist: row.text(3)), platform: row.platform(4))
        }
        return devices
    }

    func pages(size: Int, _ page: ([RegisteredDevice]) async throws -> Void) async throws {
        let statement = switch source {
        case .oneGroup: reader.groupStream
        case .union: reader.stream
        case .everyDevice: reader.appStream
        }
        // The stream statements take the preferences' app after the leading parameters.
        try statement.bind(parameters + [.text(preferencesApp)])
        defer { statement.reset() }
        var decoder = PreferencesDecoder()
        var batch: [RegisteredDevice] = []
        batch.reserveCapacity(size)
        while let row = try statement.step() {
            batch.append(RegisteredDevice(
                token: row.text(0) ?? "", user: row.text(1), preferences: decoder.decode(whitelist: row.text(2), blacklist: row.text(3)), platform: row.platform(4)))
            if batch.count >= size {
                try await page(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { try await page(batch) }
    }
}
