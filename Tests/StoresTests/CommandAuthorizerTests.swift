import Foundation
import SQLiteStores
import Stores
import RegistryAuth
import TestSupport
import Testing

/// `registry.auth` on its own: which commands need a user's token, and every way a token is
/// refused, each naming `auth` and never quoting the token.
@Suite("Registry commands tied to the user's token")
struct CommandAuthorizerTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xA000) }

    static func request(_ json: String) throws -> (RegistryRequest, String?) {
        try RegistryRequest.decode(json: Array(json.utf8))
    }

    @Test("a command naming a user needs that user's token; a device's command needs its user's token when it has one; every refusal says why without the token", arguments: [false, true])
    func commands(hs256: Bool) async throws {
        let tokens = await TestUserTokens()
        let authorizer = try await CommandAuthorizer(
            material: hs256 ? .hs256(secret: TestUserTokens.hs256Secret) : .publicKey(pem: tokens.publicKeyPEM),
            issuer: TestUserTokens.issuer, audience: TestUserTokens.audience)
        let store = try SQLiteRegistryStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("auth-\(UUID().uuidString.prefix(8)).db").path)
        try await store.apply(.registerDevice(app: "news", token: Self.token(1), user: "u-1"))
        try await store.apply(.registerDevice(app: "news", token: Self.token(2), user: nil))
        let mine = try await tokens.token(for: "u-1", hs256: hs256)

        func check(_ json: String) async throws(StoreError) {
            let (request, auth) = try RegistryRequest.decode(json: Array(json.utf8))
            try await authorizer.check(request, auth: auth, store: store)
        }
        func refused(_ json: String, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) async {
            do {
                try await check(json)
                Issue.record("accepted: \(json)", sourceLocation: sourceLocation)
            } catch {
                #expect(error.code == .unauthorized && error.field == "auth", sourceLocation: sourceLocation)
                #expect(error.message.contains(expected), "\(error.message)", sourceLocation: sourceLocation)
                #expect(!error.message.contains(mine.prefix(20)), "the token is quoted", sourceLocation: sourceLocation)
            }
        }
        // Allowed: the user's own token; a device with no user needs none.
        for json in [
            #"{"command": "set_preferences", "user": "u-1", "blacklist": {}, "auth": "\#(mine)"}"#,
            #"{"command": "add_to_group", "user": "u-1", "group": "g", "auth": "\#(mine)"}"#,
            #"{"command": "unregister_device", "app": "news", "token": "\#(Self.token(1))", "auth": "\#(mine)"}"#,
            #"{"command": "connect", "app": "news", "token": "\#(Self.token(2))", "user": "u-1", "auth": "\#(mine)"}"#,
            #"{"command": "register_device", "app": "news", "token": "\#(Self.token(3))"}"#,
            #"{"command": "add_to_blacklist", "app": "news", "token": "\#(Self.token(2))", "type": "t"}"#,
            #"{"command": "status", "app": "news", "token": "\#(Self.token(2))"}"#,
            #"{"command": "get_preferences", "user": "u-1", "app": "news", "auth": "\#(mine)"}"#,
        ] {
            do { try await check(json) } catch { Issue.record("refused \(json): \(error)") }
        }
        // Channel requests: no user's token speaks for an app's channel, the app's own users' least of all.
        for json in [#"{"command": "create_channel", "app": "news"}"#, #"{"command": "delete_channel", "app": "news", "channel": "dHN0LXNyY2gtY2hubA==", "auth": "\#(mine)"}"#] {
            do {
                try await check(json)
                Issue.record("accepted: \(json)")
            } catch {
                #expect(error.code == .unauthorized && error.field == "command" && error.message.contains("pushworker channels"), "\(error)")
            }
        }
        await refused(#"{"command": "delete_user", "user": "u-1"}"#, "auth is missing: delete_user concerns user 'u-1'")
        await refused(#"{"command": "delete_user", "user": "u-2", "auth": "\#(mine)"}"#, "auth is the token of user 'u-1', but delete_user concerns user 'u-2'")
        // Device commands: the device's user is who must ask.
        await refused(#"{"command": "unregister_device", "app": "news", "token": "\#(Self.token(1))"}"#, "concerns user 'u-1'")
        await refused(#"{"command": "status", "app": "news", "token": "\#(Self.token(1))", "auth": "\#(try await tokens.token(for: "u-2", hs256: hs256))"}"#, "but status concerns user 'u-1'")
        await refused(#"{"command": "replace_token", "app": "news", "old": "\#(Self.token(1))", "new": "\#(Self.token(5))"}"#, "concerns user 'u-1'")
        // Live Activity tokens: a token's user, as for a device; ending an activity, the user of every token it removes.
        try await store.apply(.registerLiveActivityToken(app: "news", namespace: .activity("A"), token: Self.token(6), user: "u-1"))
        try await store.apply(.registerLiveActivityToken(app: "news", namespace: .activity("A"), token: Self.token(7), user: nil))
        try await store.apply(.registerLiveActivityToken(app: "news", namespace: .activity("B"), token: Self.token(8), user: nil))
        await refused(#"{"command": "register_push_to_start_token", "app": "news", "token": "\#(Self.token(9))", "user": "u-1"}"#, "register_push_to_start_token concerns user 'u-1'")
        await refused(#"{"command": "unregister_activity_token", "app": "news", "activity": "A", "token": "\#(Self.token(6))"}"#, "concerns user 'u-1'")
        await refused(#"{"command": "end_activity", "app": "news", "activity": "A"}"#, "end_activity concerns user 'u-1'")
        for json in [
            #"{"command": "end_activity", "app": "news", "activity": "A", "auth": "\#(mine)"}"#,
            #"{"command": "end_activity", "app": "news", "activity": "B"}"#,
            #"{"command": "unregister_activity_token", "app": "news", "activity": "A", "token": "\#(Self.token(7))"}"#,
        ] {
            do { try await check(json) } catch { Issue.record("refused \(json): \(error)") }
        }
        await refused(#"{"command": "reset_badge", "user": "u-1"}"#, "auth is missing")
        // Tokens that do not hold.
        await refused(#"{"command": "delete_user", "user": "u-1", "auth": "\#(try await tokens.token(for: "u-1", seconds: -60, hs256: hs256))"}"#, "auth has expired")
        await refused(#"{"command": "delete_user", "user": "u-1", "auth": "\#(try await tokens.token(for: "u-1", issuer: "https://evil.example", hs256: hs256))"}"#, "issued by 'https://evil.example'")
        await refused(#"{"command": "delete_user", "user": "u-1", "auth": "\#(try await tokens.token(for: "u-1", audience: "another-service", hs256: hs256))"}"#, "not meant for audience 'pushworker'")
        await refused(#"{"command": "delete_user", "user": "u-1", "auth": "\#(try await tokens.token(for: "u-1", hs256: !hs256))"}"#, "auth is not")
        await refused(#"{"command": "delete_user", "user": "u-1", "auth": "not-a-jwt"}"#, "auth is not a JWT")
        // A token altered after signing: its signature no longer holds.
        let parts = mine.split(separator: ".")
        let forged = parts[0] + "." + parts[1].dropLast(2) + "AA." + parts[2]
        await refused(#"{"command": "delete_user", "user": "u-1", "auth": "\#(forged)"}"#, "auth is not")
    }

    @Test("a key source that cannot be used names its key")
    func keySources() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("auth-keys-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let junk = directory.appendingPathComponent("junk.pem").path
        try Data("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n".utf8).write(to: URL(fileURLWithPath: junk))
        let cases: [(String?, String?, String?, [String: String], String, String)] = [
            (nil, nil, nil, [:], "registry.auth", "names no key"),
            (junk, nil, "S", [:], "registry.auth", "names key_file and hs256_secret_env; give one"),
            ("/nonexistent.pem", nil, nil, [:], "registry.auth.key_file", "cannot read '/nonexistent.pem'"),
            (junk, nil, nil, [:], "registry.auth.key_file", "is not a PEM public key"),
            (nil, junk, nil, [:], "registry.auth.jwks_file", "is not a JSON Web Key Set"),
            (nil, nil, "AUTH_SECRET", [:], "registry.auth.hs256_secret_env", "environment variable AUTH_SECRET is not set"),
            (nil, nil, "AUTH_SECRET", ["AUTH_SECRET": "short"], "registry.auth.hs256_secret_env", "shorter than 32 bytes"),
        ]
        for (keyFile, jwksFile, variable, environment, key, message) in cases {
            do {
                _ = try AuthKeyMaterial.load(keyFile: keyFile, jwksFile: jwksFile, secretVariable: variable, environment: environment)
                Issue.record("accepted \(key)")
            } catch {
                #expect(error.key == key && error.message.contains(message), "\(error.key): \(error.message)")
                #expect(!error.message.contains("short\""))
            }
        }
    }
}
