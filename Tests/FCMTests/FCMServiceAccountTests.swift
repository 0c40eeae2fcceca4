import FCM
import Foundation
import JWTKit
import TestSupport
import Testing

@Suite("FCM service account and its OAuth2 grant")
struct FCMServiceAccountTests {
    @Test("a console key file gives the project, the email, the token endpoint and a key that signs")
    func reads() throws {
        let account = try FCMServiceAccount(json: TestServiceAccount.json(TestServiceAccount.fields()), source: "sa.json")
        #expect(account.projectID == "pushworker-demo")
        #expect(account.clientEmail == "pushworker@pushworker-demo.iam.gserviceaccount.com")
        #expect(account.tokenURI == "https://oauth2.googleapis.com/token")
        #expect(account.privateKeyID == "0123456789abcdef")
        var noURI = TestServiceAccount.fields(tokenURI: nil)
        noURI["token_uri"] = nil
        #expect(try FCMServiceAccount(json: TestServiceAccount.json(noURI), source: "sa.json").tokenURI == FCMServiceAccount.googleTokenURI)
        let mock = try FCMServiceAccount(json: TestServiceAccount.json(TestServiceAccount.fields(tokenURI: "https://127.0.0.1:8443/token")), source: "sa.json")
        #expect(mock.tokenURI == "https://127.0.0.1:8443/token")
    }

    @Test("a file that cannot serve is refused naming its field, and the key never appears in the message")
    func refusals() throws {
        func refusal(_ change: (inout [String: Any]) -> Void) -> FCMConfigurationError? {
            var fields = TestServiceAccount.fields()
            change(&fields)
            do {
                _ = try FCMServiceAccount(json: TestServiceAccount.json(fields), source: "sa.json")
                return nil
            } catch {
                return error
            }
        }
        #expect(refusal { $0["private_key"] = nil }?.field == "private_key")
        let badKey = refusal { $0["private_key"] = "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n-----END PRIVATE KEY-----\n" }
        #expect(badKey?.field == "private_key")
        #expect(badKey?.message.contains("MIIBVQ") == false)
        #expect(refusal { $0["project_id"] = nil }?.field == "project_id")
        #expect(refusal { $0["project_id"] = "123456789012" }?.message.contains("project number") == true)
        #expect(refusal { $0["client_email"] = 7 }?.field == "client_email")
        #expect(refusal { $0["type"] = "authorized_user" }?.field == "type")
        #expect(refusal { $0["token_uri"] = "ftp://example.com/token" }?.field == "token_uri")
        let googleServices = Data(#"{"project_info": {"project_id": "x"}, "client": []}"#.utf8)
        #expect(throws: FCMConfigurationError.self) { try FCMServiceAccount(json: googleServices, source: "google-services.json") }
        do {
            _ = try FCMServiceAccount(json: googleServices, source: "google-services.json")
        } catch {
            #expect(error.message.contains("google-services.json") && error.message.contains("service account key"))
        }
        #expect(throws: FCMConfigurationError.self) { try FCMServiceAccount(json: Data("[1]".utf8), source: "sa.json") }
        #expect(throws: FCMConfigurationError.self) { try FCMServiceAccount(path: "/nonexistent/sa.json") }
    }

    @Test("the grant is an RS256 JWT for FCM's scope: issuer the account, audience the token endpoint, an hour at most, the key's id")
    func grant() async throws {
        let account = try FCMServiceAccount(json: TestServiceAccount.json(TestServiceAccount.fields(tokenURI: "https://127.0.0.1:8443/token")), source: "sa.json")
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let assertion = try await FCMGrant.assertion(account, now: now)
        let header = try JSONSerialization.jsonObject(with: Self.base64URL(String(assertion.split(separator: ".")[0]))) as? [String: Any]
        #expect(header?["alg"] as? String == "RS256" && header?["kid"] as? String == "0123456789abcdef")
        // Verified with the account's public key alone (what Google, and the mock, do).
        let keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PublicKey(pem: account.publicKeyPEM), digestAlgorithm: .sha256, kid: JWKIdentifier(string: "0123456789abcdef"))
        let claims = try await keys.verify(assertion, as: Unexpired.self)
        #expect(claims.iss == account.clientEmail && claims.scope == FCMGrant.scope && claims.aud == ["https://127.0.0.1:8443/token"])
        #expect(claims.exp - claims.iat == 3600 && claims.iat == 1_800_000_000)
        // A signature changed in its last bytes does not verify.
        await #expect(throws: (any Error).self) { _ = try await keys.verify(String(assertion.dropLast(4)) + "AAAA", as: Unexpired.self) }
        #expect(String(decoding: FCMGrant.formBody(assertion: "a.b.c"), as: UTF8.self)
            == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant%2Dtype%3Ajwt%2Dbearer&assertion=a.b.c")
    }

    @Test("the token endpoint's answer: the token and its expiry, renewed five minutes before it lapses; a refusal names Google's error")
    func accessToken() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = try FCMAccessToken(response: Data(#"{"access_token":"ya29.c.abc","expires_in":3599,"token_type":"Bearer"}"#.utf8), now: now)
        #expect(token.value == "ya29.c.abc" && token.expiresAt == now.addingTimeInterval(3599))
        #expect(!token.needsRenewal(at: now.addingTimeInterval(3000)))
        #expect(token.needsRenewal(at: now.addingTimeInterval(3300)))
        do {
            _ = try FCMAccessToken(response: Data(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#.utf8), now: now)
            Issue.record("a refusal was taken for a token")
        } catch {
            #expect(error.message.contains("invalid_grant: Invalid JWT Signature."))
        }
        #expect(throws: FCMConfigurationError.self) { try FCMAccessToken(response: Data(#"{"access_token":"x","expires_in":0}"#.utf8)) }
        #expect(throws: FCMConfigurationError.self) { try FCMAccessToken(response: Data(#"{"access_token":"x","expires_in":60,"token_type":"MAC"}"#.utf8)) }
    }

    /// The claims as they were signed, read back.
    struct Unexpired: JWTPayload {
        var iss: String
        var scope: String
        var aud: [String]
        var iat: Int
        var exp: Int

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            iss = try container.decode(String.self, forKey: .iss)
            scope = try container.decode(String.self, forKey: .scope)
            if let many = try? container.decode([String].self, forKey: .aud) {
                aud = many
            } else {
                aud = [try container.decode(String.self, forKey: .aud)]
            }
            iat = try container.decode(Int.self, forKey: .iat)
            exp = try container.decode(Int.self, forKey: .exp)
        }

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    static func base64URL(_ text: String) -> Data {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)!
    }
}
