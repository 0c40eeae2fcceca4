import Foundation

/// A service account key file as the Firebase console gives one, with a fresh RSA key made by
/// the openssl program (no key is kept in the repository).
enum ServiceAccountFixture {
    static let privateKeyPEM: String = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try! process.run()
        let pem = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        precondition(process.terminationStatus == 0, "openssl genpkey failed")
        return String(decoding: pem, as: UTF8.self)
    }()

    static func fields(tokenURI: String? = "https://oauth2.googleapis.com/token") -> [String: Any] {
        var fields: [String: Any] = [
            "type": "service_account", "project_id": "pushworker-demo", "private_key_id": "0123456789abcdef",
            "private_key": privateKeyPEM, "client_email": "pushworker@pushworker-demo.iam.gserviceaccount.com", "client_id": "1234567890",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        ]
        fields["token_uri"] = tokenURI
        return fields
    }

    static func json(_ fields: [String: Any]) -> Data {
        try! JSONSerialization.data(withJSONObject: fields)
    }
}
