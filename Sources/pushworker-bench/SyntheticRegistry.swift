import CommandLineSupport
import Foundation
import Logging
import PostgresNIO
import Stores

/// The registry the benchmarks load: `members` users `u<i>`, each with one device of app `bench`
/// (token i + 1 as 64 hex digits, the tokens `bench e2e` names), all in group `all`, the first
/// `small` also in group `first`, each in one of `groups` others (`g<i % groups>`). A share of them
/// blacklist type `news` (the benchmarks' job type), and every seventh whitelists it, so filtering
/// has real work.
struct SyntheticRegistry {
    var members: Int
    var small: Int
    var groups: Int
    var filteredPercent: Int

    static func token(_ index: Int) -> String { String(format: "%064x", index + 1) }

    /// A token as APNs gives them: 32 bytes that look random, so an index keyed on tokens is
    /// written at random places, not appended to in order as `token` (ascending) lets it be.
    /// The same index always gives the same token (SplitMix64 of the index), and distinct indexes
    /// distinct tokens (its first 64 bits are a bijection of the index).
    static func randomToken(_ index: Int) -> String {
        var state = UInt64(truncatingIfNeeded: index)
        var hex = ""
        hex.reserveCapacity(64)
        for _ in 0..<4 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            let digits = String(z, radix: 16)
            hex += String(repeating: "0", count: 16 - digits.count) + digits
        }
        return hex
    }

    func commands(of index: Int) -> [RegistryCommand] {
        let user = "u\(index)"
        var commands: [RegistryCommand] = [
            .registerDevice(app: "bench", token: Self.token(index), user: user),
            .addToGroup(user: user, group: "all", createGroup: true),
            .addToGroup(user: user, group: "g\(index % max(1, groups))", createGroup: true),
        ]
        if index < small { commands.append(.addToGroup(user: user, group: "first", createGroup: true)) }
        if index % 100 < filteredPercent {
            commands.append(.setPreferences(.user(user), NotificationPreferences(blacklist: ["news": []])))
        } else if index % 7 == 0 {
            commands.append(.setPreferences(.user(user), NotificationPreferences(whitelist: ["news": [], "grades": ["final"]])))
        }
        return commands
    }

    /// Devices of `first`/`all` that the job of type `news` does not filter.
    func passing(of count: Int) -> Int { (0..<count).filter { $0 % 100 >= filteredPercent }.count }

    /// Applies the commands in transactions of 10,000, printing progress to standard error.
    func load(into store: any RegistryStore) async throws {
        let start = ContinuousClock.now
        var batch: [RegistryCommand] = []
        batch.reserveCapacity(10_100)
        var applied = 0
        for index in 0..<members {
            batch += commands(of: index)
            if batch.count >= 10_000 || index == members - 1 {
                try await store.apply(batch: batch)
                applied += batch.count
                batch.removeAll(keepingCapacity: true)
                if (index + 1) % 100_000 == 0 || index == members - 1 {
                    FileHandle.standardError.write(Data("loaded \(index + 1) of \(members) users\n".utf8))
                }
            }
        }
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        print(String(format: "registry loaded: %d users, %d commands in %.1f s (%.0f commands/s)", members, applied, seconds, Double(applied) / seconds))
    }

    /// The same registry written into PostgreSQL with set-based SQL (the store has created the
    /// schema): a million users through the command path would take the benchmark minutes of
    /// round trips, none of which it measures.
    func load(postgres url: String) async throws {
        guard let components = URLComponents(string: url), let host = components.host else { throw CommandFailure("--postgres: not a URL") }
        let client = PostgresClient(
            configuration: .init(
                host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
                database: String(components.path.dropFirst()), tls: .disable),
            backgroundLogger: Logger(label: "pushworker.bench"))
        let start = ContinuousClock.now
        let last = members - 1, lastSmall = small - 1, groups = max(1, groups), filtered = filteredPercent
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { await client.run() }
            let statements: [PostgresQuery] = [
                "TRUNCATE memberships, devices, groups, users",
                """
                INSERT INTO users(id, whitelist, blacklist) SELECT 'u' || i,
                  CASE WHEN i % 100 >= \(filtered) AND i % 7 = 0 THEN '{"grades":["final"],"news":[]}' ELSE '{}' END,
                  CASE WHEN i % 100 < \(filtered) THEN '{"news":[]}' ELSE '{}' END
                FROM generate_series(0, \(last)) i
                """,
                "INSERT INTO groups(name) SELECT 'g' || i FROM generate_series(0, \(groups - 1)) i UNION SELECT 'all' UNION SELECT 'first'",
                """
                INSERT INTO devices(app, token, user_id, registered_at, invalid)
                SELECT 'bench', lpad(to_hex(i + 1), 64, '0'), 'u' || i, extract(epoch from now()), false FROM generate_series(0, \(last)) i
                """,
                "INSERT INTO memberships(group_name, user_id) SELECT 'all', 'u' || i FROM generate_series(0, \(last)) i",
                "INSERT INTO memberships(group_name, user_id) SELECT 'first', 'u' || i FROM generate_series(0, \(lastSmall)) i",
                "INSERT INTO memberships(group_name, user_id) SELECT 'g' || (i % \(groups)), 'u' || i FROM generate_series(0, \(last)) i",
                "ANALYZE",
            ]
            for statement in statements { try await client.query(statement) }
            tasks.cancelAll()
        }
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        print(String(format: "registry loaded into PostgreSQL with SQL: %d users in %.1f s", members, seconds))
    }
}
