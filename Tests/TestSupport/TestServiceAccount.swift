import Foundation

/// A Google service account key file as the Firebase console gives one, with a fresh RSA key
/// made by the openssl program once per test process (no key is kept in the repository).
public enum TestServiceAccount {
    public static let projectID = "pushworker-demo"
    public static let clientEmail = "pushworker@pushworker-demo.iam.gserviceaccount.com"
    public static let keyID = "0123456789abcdef"

    public static let privateKeyPEM: String = {
        do {
            return try TestKeys.openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        } catch {
            fatalError("cannot make a test RSA key: \(error)")
        }
    }()

    /// The public half, as the mock's token endpoint checks the grant with it.
    public static let publicKeyPEM: String = {
        do {
            return try TestKeys.openssl(["pkey", "-pubout"], input: Data(privateKeyPEM.utf8))
        } catch {
            fatalError("cannot derive the test RSA key's public half: \(error)")
        }
    }()

    /// The key file's fields; `tokenURI` nil leaves `token_uri` out (Google's is then meant).
    public static func fields(tokenURI: String? = "https://oauth2.googleapis.com/token") -> [String: Any] {
        var fields: [String: Any] = [
            "type": "service_account", "project_id": projectID, "private_key_id": keyID, "private_key": privateKeyPEM,
            "client_email": clientEmail, "client_id": "1234567890", "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        ]
        fields["token_uri"] = tokenURI
        return fields
    }

    public static func json(_ fields: [String: Any]) -> Data {
        (try? JSONSerialization.data(withJSONObject: fields)) ?? Data()
    }

    /// A key file written to a temporary path, whose token endpoint is `tokenURI`.
    public static func file(tokenURI: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("service-account-\(UUID().uuidString.prefix(8)).json")
        try json(fields(tokenURI: tokenURI)).write(to: url)
        return url
    }
}
