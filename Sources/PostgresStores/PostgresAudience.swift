import Logging
import PostgresNIO
import Stores

/// An audience read from PostgreSQL inside one repeatable-read transaction on one leased
/// connection: the count and the pages see the same snapshot.
struct PostgresAudience: RegistryAudience {
    /// Whose devices it reads.
    enum Source {
        /// One group and no users: the members joined straight to their devices (each member
        /// once by the group's key, nothing to deduplicate).
        case oneGroup(String)
        /// Users and groups: the union of the users' ids first.
        case union(users: [String], groups: [String])
        /// Every valid device of the app key, connected or not (a Live Activity's tokens).
        case everyDevice
    }

    let connection: PostgresConnection
    let logger: Logger
    let app: String
    let source: Source

    /// Whose users' per-app preferences apply: the base app of a Live Activity namespace.
    private var preferencesApp: String { TokenNamespace.preferencesApp(app) }

    func count() async throws -> Int {
        switch source {
        case .oneGroup(let group):
            return try await single("""
                SELECT COUNT(*) FROM memberships m JOIN devices d ON d.user_id = m.user_id AND d.app = \(app) AND NOT d.invalid
                WHERE m.group_name = \(group)
                """)
        case .union(let users, let groups):
            return try await single("""
                SELECT COUNT(*) FROM devices d
                WHERE d.app = \(app) AND NOT d.invalid AND d.user_id IN (
                  SELECT unnest(\(users)::text[]) UNION SELECT user_id FROM memberships WHERE group_name = ANY(\(groups)))
                """)
        case .everyDevice:
            return try await single("SELECT COUNT(*) FROM devices d WHERE d.app = \(app) AND NOT d.invalid")
        }
    }

    func count(among tokens: [String]) async throws -> Int {
        guard !tokens.isEmpty else { return 0 }
        switch source {
        case .oneGroup(let group):
            return try await single("""
                SELECT COUNT(*) FROM devices d
                WHERE d.app = \(app) AND NOT d.invalid AND d.token = ANY(\(tokens))
                  AND d.user_id IN (SELECT user_id FROM memberships WHERE group_name = \(group))
                """)
        case .union(let users, let groups):
            return try await single("""
                SELECT COUNT(*) FROM devices d
                WHERE d.app = \(app) AND NOT d.invalid AND d.token = ANY(\(tokens)) AND d.user_id IN (
                  SELECT unnest(\(users)::text[]) UNION SELECT user_id FROM memberships WHERE group_name = ANY(\(groups)))
                """)
        case .everyDevice:
            return try await single("SELECT COUNT(*) FROM devices d WHERE d.app = \(app) AND NOT d.invalid AND d.token = ANY(\(tokens))")
        }
    }

    func devices(tokens: [String]) async throws -> [String: RegisteredDevice] {
        guard !tokens.isEmpty else { return [:] }
        var devices: [String: RegisteredDevice] = [:]
        var decoder = PreferencesDecoder()
        let rows = try await connection.query(PostgresRegistryStore.devicesOfTokens(app: app, tokens: tokens), logger: logger)
        for try await (token, user, whitelist, blacklist, platform) in rows.decode((String, String?, String?, String?, String).self) {
            devices[token] = RegisteredDevice(
                token: token, user: user, preferences: decoder.decode(whitelist: whitelist, blacklist: blacklist),
                platform: DevicePlatform(rawValue: platform) ?? .apns)
        }
        return devices
    }

    func pages(size: Int, _ page: ([RegisteredDevice]) async throws -> Void) async throws {
        // Rows arrive as the server sends them, with backpressure: the result is never held whole.
        let query: PostgresQuery
        switch source {
        case .oneGroup(let group):
            query = """
                SELECT d.token, d.user_id, COALESCE(p.whitelist, u.whitelist), COALESCE(p.blacklist, u.blacklist), d.platform
                FROM memberships m JOIN devices d ON d.user_id = m.user_id AND d.app = \(app) AND NOT d.invalid
                JOIN users u ON u.id = m.user_id LEFT JOIN app_preferences p ON p.user_id = m.user_id AND p.app = \(preferencesApp)
                WHERE m.group_name = \(group)
                """
        case .union(let users, let groups):
            query = """
                SELECT d.token, d.user_id, COALESCE(p.whitelist, u.whitelist), COALESCE(p.blacklist, u.blacklist), d.platform
                FROM devices d JOIN users u ON u.id = d.user_id LEFT JOIN app_preferences p ON p.user_id = d.user_id AND p.app = \(preferencesApp)
                WHERE d.app = \(app) AND NOT d.invalid AND d.user_id IN (
                  SELECT unnest(\(users)::text[]) UNION SELECT user_id FROM memberships WHERE group_name = ANY(\(groups)))
                """
        case .everyDevice:
            // A device with no user: its own preferences, as `devicesOfTokens` gives them.
            query = """
                SELECT d.token, d.user_id, COALESCE(p.whitelist, u.whitelist, d.whitelist), COALESCE(p.blacklist, u.blacklist, d.blacklist), d.platform
                FROM devices d LEFT JOIN users u ON u.id = d.user_id LEFT JOIN app_preferences p ON p.user_id = d.user_id AND p.app = \(preferencesApp)
                WHERE d.app = \(app) AND NOT d.invalid
                """
        }
        let rows = try await connection.query(query, logger: logger)
        var decoder = PreferencesDecoder()
        var batch: [RegisteredDevice] = []
        batch.reserveCapacity(size)
        for try await (token, user, whitelist, blacklist, platform) in rows.decode((String, String?, String?, String?, String).self) {
            batch.append(RegisteredDevice(
                token: token, user: user, preferences: decoder.decode(whitelist: whitelist, blacklist: blacklist),
                platform: DevicePlatform(rawValue: platform) ?? .apns))
            if batch.count >= size {
                try await page(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { try await page(batch) }
    }

    private func single(_ query: PostgresQuery) async throws -> Int {
        var value = 0
        for try await count in try await connection.query(query, logger: logger).decode(Int.self) { value = count }
        return value
    }
}
