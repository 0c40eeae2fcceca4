import APNs
import Foundation
import TestSupport
import Testing

@Suite("Provider tokens")
struct ProviderTokenTests {
    @Test("the JWT has the header and claims APNs expects, and OpenSSL's verify accepts its signature")
    func encoding() throws {
        let pem = try TestKeys.newP8()
        let key = try ES256Key.privateKey(pem: pem)
        let token = try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(timeIntervalSince1970: 1_700_000_000.9), key: key)
        let parts = token.jwt.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        func decode(_ part: String) throws -> [String: Any] {
            var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while base64.count % 4 != 0 { base64 += "=" }
            let data = try #require(Data(base64Encoded: base64))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        let header = try decode(parts[0])
        #expect(header["alg"] as? String == "ES256")
        #expect(header["kid"] as? String == "ABC123DEFG")
        let claims = try decode(parts[1])
        #expect(claims["iss"] as? String == "DEF123GHIJ")
        #expect((claims["iat"] as? NSNumber)?.int64Value == 1_700_000_000)
        #expect(!token.jwt.contains("="))

        var signatureBase64 = parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while signatureBase64.count % 4 != 0 { signatureBase64 += "=" }
        let raw = try #require(Data(base64Encoded: signatureBase64))
        #expect(raw.count == 64)

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("jwt-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(key.publicKeyPEM.utf8).write(to: dir.appendingPathComponent("pub.pem"))
        try Data(TestKeys.derSignature(Array(raw))).write(to: dir.appendingPathComponent("sig.der"))
        try Data((parts[0] + "." + parts[1]).utf8).write(to: dir.appendingPathComponent("input"))
        let verified = try TestKeys.openssl(["dgst", "-sha256", "-verify", dir.appendingPathComponent("pub.pem").path,
            "-signature", dir.appendingPathComponent("sig.der").path, dir.appendingPathComponent("input").path])
        #expect(verified.contains("Verified OK"))

        // And a tampered input does not verify.
        try Data((parts[0] + "." + parts[1] + "x").utf8).write(to: dir.appendingPathComponent("input"))
        #expect(throws: TestFailure.self) {
            try TestKeys.openssl(["dgst", "-sha256", "-verify", dir.appendingPathComponent("pub.pem").path,
                "-signature", dir.appendingPathComponent("sig.der").path, dir.appendingPathComponent("input").path])
        }
    }

    @Test("the verifier accepts good tokens and names what is wrong with bad ones")
    func verification() throws {
        let key = try ES256Key.privateKey(pem: try TestKeys.newP8())
        let other = try ES256Key.privateKey(pem: try TestKeys.newP8())
        let publicKey = try ES256Key.publicKey(pem: key.publicKeyPEM)
        let keys = ["KEY1": (teamID: "TEAM1", key: publicKey)]
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let good = try ProviderToken.sign(keyID: "KEY1", teamID: "TEAM1", issuedAt: now, key: key)
        #expect(try ProviderToken.verify(good.jwt, keys: keys, now: now).get() == good)

        func rejection(_ jwt: String, at time: Date = now) -> ProviderToken.Rejection? {
            if case .failure(let rejection) = ProviderToken.verify(jwt, keys: keys, now: time) { return rejection }
            return nil
        }
        #expect(rejection(good.jwt, at: now.addingTimeInterval(3601))?.reason == .expiredProviderToken)
        #expect(rejection(try ProviderToken.sign(keyID: "KEY1", teamID: "TEAM1", issuedAt: now, key: other).jwt)?.detail == "signature does not verify")
        #expect(rejection(try ProviderToken.sign(keyID: "KEY2", teamID: "TEAM1", issuedAt: now, key: key).jwt)?.detail == "unknown key id KEY2")
        #expect(rejection(try ProviderToken.sign(keyID: "KEY1", teamID: "TEAM2", issuedAt: now, key: key).jwt)?.reason == .invalidProviderToken)
        #expect(rejection("not.a.jwt")?.reason == .invalidProviderToken)
    }

    @Test("keys that are not EC P-256 PEM are refused with OpenSSL's reason")
    func badKeys() throws {
        #expect(throws: APNsCredentialError.self) { try ES256Key.privateKey(pem: "hello") }
        let rsa = try TestKeys.openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"])
        do {
            _ = try ES256Key.privateKey(pem: rsa)
            Issue.record("accepted an RSA key")
        } catch {
            #expect(error.description.contains("not an EC P-256 key"))
        }
    }

    @Test("a token is reused for 50 minutes, replaced after ExpiredProviderToken, but never more than once in 20 minutes")
    func reuseAndRefresh() throws {
        let key = try ES256Key.privateKey(pem: try TestKeys.newP8())
        let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))
        let source = ProviderTokenSource(keyID: "K", teamID: "T", key: key, clock: { clock.now })
        let first = try source.current()
        clock.advance(49 * 60)
        #expect(try source.current() == first)
        clock.advance(61)
        let second = try source.current()
        #expect(second != first)
        #expect(second.issuedAt == clock.now.roundedDownToSeconds)

        // APNs calls the 10-minute-old token expired: too young to replace (20-minute rule).
        clock.advance(10 * 60)
        #expect(try source.replace(second) == second)
        // At 21 minutes it is replaced at once, without waiting for the 50 minutes.
        clock.advance(11 * 60)
        let third = try source.replace(second)
        #expect(third != second)
        // A late report about the old token does not replace the new one again.
        #expect(try source.replace(second) == third)
        #expect(try source.current() == third)
    }

    @Test("a token another worker published is taken only when this key signed it for this team; a token signed here tells the hook what it replaces")
    func verifiedAndAdopted() throws {
        let key = try ES256Key.privateKey(pem: try TestKeys.newP8())
        let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))
        let source = ProviderTokenSource(keyID: "K", teamID: "T", key: key, clock: { clock.now })
        let peer = ProviderTokenSource(keyID: "K", teamID: "T", key: key, clock: { clock.now })
        let theirs = try peer.signCandidate()
        #expect(source.verified(theirs.jwt) == theirs)
        #expect(peer.installed == nil, "a candidate is not in use until adopted")

        let otherKey = try ES256Key.privateKey(pem: try TestKeys.newP8())
        #expect(source.verified(try ProviderToken.sign(keyID: "K", teamID: "T", issuedAt: clock.now, key: otherKey).jwt) == nil)
        #expect(source.verified(try ProviderToken.sign(keyID: "K2", teamID: "T", issuedAt: clock.now, key: key).jwt) == nil)
        #expect(source.verified(try ProviderToken.sign(keyID: "K", teamID: "T2", issuedAt: clock.now, key: key).jwt) == nil)
        var tampered = Array(theirs.jwt.utf8)
        tampered[tampered.count - 3] = tampered[tampered.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(source.verified(String(decoding: tampered, as: UTF8.self)) == nil)
        #expect(source.verified("not.a.token") == nil && source.verified("") == nil)

        let signed = Locked<[ProviderTokenSource.SignedHere]>([])
        source.onSignedHere { event in signed.withLock { $0.append(event) } }
        #expect(source.adopt(theirs, replacing: nil))
        #expect(try source.current() == theirs && signed.value.isEmpty, "an adopted token is used, nothing signed")
        clock.advance(50 * 60)
        let own = try source.current()
        #expect(own != theirs)
        #expect(signed.value.count == 1 && signed.value.first?.fresh == own && signed.value.first?.replaced == theirs)
        #expect(signed.value.first?.replacedAfterRefusal == false)
        // Not over a token signed here since the caller looked (APNs refused the old one).
        #expect(!source.adopt(theirs, replacing: theirs) && source.installed == own)
        clock.advance(21 * 60)
        let replacement = try source.replace(own)
        #expect(signed.value.last?.fresh == replacement && signed.value.last?.replaced == own && signed.value.last?.replacedAfterRefusal == true)
        // Its description never holds the JWT.
        #expect(!"\(replacement)".contains(replacement.jwt) && !String(reflecting: replacement).contains(replacement.jwt))
    }

    @Test("many tasks asking at once all get the same token")
    func concurrency() async throws {
        let key = try ES256Key.privateKey(pem: try TestKeys.newP8())
        let source = ProviderTokenSource(keyID: "K", teamID: "T", key: key)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<200 { group.addTask { try source.current().jwt } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
    }
}

final class TestClock: Sendable {
    private let value: Locked<Date>
    init(_ start: Date) { value = Locked(start) }
    var now: Date { value.value }
    func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

extension Date {
    var roundedDownToSeconds: Date { Date(timeIntervalSince1970: timeIntervalSince1970.rounded(.down)) }
}
