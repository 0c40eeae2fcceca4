/// An audience read from SQLite inside one read transaction (WAL: writers go on meanwhile, and
/// this reader keeps seeing the snapshot its first read fixed).
struct SQLiteAudience: RegistryAudience {
    /// A connection of its own with the audience statements prepared. Used by one task at a time:
    /// it is out of the store's pool while an audience is read.
    final class Reader: @unchecked Sendable {
        let database: SQLiteDatabase
        let count, countAmong, stream: SQLiteStatement

        /// The devices of app ?1 whose user is named in ?2 or is a member of a group named in ?3
        /// (JSON arrays). A device has one user, so it comes once however it is reached.
        static let audience = """
            FROM devices d
            WHERE d.app = ?1 AND d.invalid = 0 AND d.user_id IN (
              SELECT value FROM json_each(?2)
              UNION SELECT user_id FROM memberships WHERE group_name IN (SELECT value FROM json_each(?3)))
            """

        init(path: String) throws(RegistryError) {
            database = try SQLiteDatabase(path: path)
            count = try database.prepare("SELECT COUNT(*) \(Self.audience)")
            countAmong = try database.prepare("SELECT COUNT(*) \(Self.audience) AND d.token IN (SELECT value FROM json_each(?4))")
            stream = try database.prepare("""
                SELECT d.token, d.user_id, u.whitelist, u.blacklist
                FROM devices d JOIN users u ON u.id = d.user_id
                WHERE d.app = ?1 AND d.invalid = 0 AND d.user_id IN (
                  SELECT value FROM json_each(?2)
                  UNION SELECT user_id FROM memberships WHERE group_name IN (SELECT value FROM json_each(?3)))
                """)
        }
    }

    let reader: Reader
    let app: String
    /// JSON arrays, bound as one parameter each.
    let users: String
    let groups: String

    func count() async throws -> Int {
        var count = 0
        try reader.count.run([.text(app), .text(users), .text(groups)]) { row in count = Int(row.integer(0)) }
        return count
    }

    func count(among tokens: [String]) async throws -> Int {
        guard !tokens.isEmpty else { return 0 }
        var count = 0
        try reader.countAmong.run([.text(app), .text(users), .text(groups), .text(SQLiteRegistryStore.json(tokens))]) { row in
            count = Int(row.integer(0))
        }
        return count
    }

    func pages(size: Int, _ page: ([RegisteredDevice]) async throws -> Void) async throws {
        let statement = reader.stream
        try statement.bind([.text(app), .text(users), .text(groups)])
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
