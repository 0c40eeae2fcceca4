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

        init(path: String) throws(RegistryError) {
            database = try SQLiteDatabase(path: path)
            groupCount = try database.prepare("SELECT COUNT(*) \(Self.members)")
            groupCountAmong = try database.prepare("SELECT COUNT(*) \(Self.members) AND d.token IN (SELECT value FROM json_each(?3))")
            groupStream = try database.prepare("""
                SELECT d.token, d.user_id, \(Self.userPreferences) FROM memberships m
                CROSS JOIN devices d ON d.user_id = m.user_id AND d.app = ?1 AND d.invalid = 0
                CROSS JOIN users u ON u.id = m.user_id LEFT JOIN app_preferences p ON p.user_id = m.user_id AND p.app = ?1
                WHERE m.group_name = ?2
                """)
            count = try database.prepare("SELECT COUNT(*) \(Self.union)")
            countAmong = try database.prepare("SELECT COUNT(*) \(Self.union) WHERE d.token IN (SELECT value FROM json_each(?4))")
            stream = try database.prepare("""
                SELECT d.token, d.user_id, \(Self.userPreferences) \(Self.union) CROSS JOIN users u ON u.id = a.user_id
                LEFT JOIN app_preferences p ON p.user_id = a.user_id AND p.app = ?1
                """)
            devicesOfTokens = try database.prepare(SQLiteRegistryStore.devicesOfTokens)
        }
    }

    let reader: Reader
    let app: String
    /// The statements' leading parameters: app and group, or app, users and groups as JSON arrays.
    let parameters: [SQLiteStatement.Value]
    let oneGroup: Bool

    init(reader: Reader, app: String, users: [String], groups: [String]) {
        self.reader = reader
        self.app = app
        oneGroup = users.isEmpty && groups.count == 1
        parameters = oneGroup
            ? [.text(app), .text(groups[0])]
            : [.text(app), .text(SQLiteRegistryStore.json(users)), .text(SQLiteRegistryStore.json(groups))]
    }

    func count() async throws -> Int {
        var count = 0
        try (oneGroup ? reader.groupCount : reader.count).run(parameters) { row in count = Int(row.integer(0)) }
        return count
    }

    func count(among tokens: [String]) async throws -> Int {
        guard !tokens.isEmpty else { return 0 }
        var count = 0
        try (oneGroup ? reader.groupCountAmong : reader.countAmong).run(parameters + [.text(SQLiteRegistryStore.json(tokens))]) { row in
            count = Int(row.integer(0))
        }
        return count
    }

    func devices(tokens: [String]) async throws -> [String: RegisteredDevice] {
        guard !tokens.isEmpty else { return [:] }
        var devices: [String: RegisteredDevice] = [:]
        var decoder = PreferencesDecoder()
        try reader.devicesOfTokens.run([.text(app), .text(SQLiteRegistryStore.json(tokens))]) { row in
            guard let token = row.text(0) else { return }
            devices[token] = RegisteredDevice(token: token, user: row.text(1), preferences: decoder.decode(whitelist: row.text(2), blacklist: row.text(3)))
        }
        return devices
    }

    func pages(size: Int, _ page: ([RegisteredDevice]) async throws -> Void) async throws {
        let statement = oneGroup ? reader.groupStream : reader.stream
        try statement.bind(parameters)
        defer { statement.reset() }
        var decoder = PreferencesDecoder()
        var batch: [RegisteredDevice] = []
        batch.reserveCapacity(size)
        while let row = try statement.step() {
            batch.append(RegisteredDevice(
                token: row.text(0) ?? "", user: row.text(1), preferences: decoder.decode(whitelist: row.text(2), blacklist: row.text(3))))
            if batch.count >= size {
                try await page(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { try await page(batch) }
    }
}
