import Foundation
import JWTKit

/// A Google service account key (the JSON file the Firebase console's "Generate new private key"
/// gives), read and proved usable without sending anything: its project, its email, its RSA key
/// and the token endpoint it names. `token_uri` is honoured, so a mock or a gateway can stand in
/// for Google's.
public struct FCMServiceAccount: Sendable {
    /// The project's id (`my-app-1234`), as FCM's URL wants it; not its number.
    public let projectID: String
    /// The grant's issuer.
    public let clientEmail: String
    /// Where the grant is posted; the grant's audience.
    public let tokenURI: String
    /// The key's id, sent as the grant's `kid`.
    public let privateKeyID: String?
    /// The grant's signing key.
    let privateKey: Insecure.RSA.PrivateKey

    /// Google's token endpoint, for a file that names none.
    public static let googleTokenURI = "https://oauth2.googleapis.com/token"

    /// Reads a key file's JSON. `source` names it in errors (a path, or the variable it came from).
    public init(json: some DataProtocol, source: String) throws(FCMConfigurationError) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)), let fields = object as? [String: Any] else {
            throw FCMConfigurationError("\(source) is not a JSON object (expected a service account key file from the Firebase console)")
        }
        if fields["project_info"] != nil || fields["client"] != nil {
            throw FCMConfigurationError(
                "\(source) is an app's google-services.json, which holds no key; generate a service account key in the Firebase console (Project settings, Service accounts)")
        }
        if let type = fields["type"], type as? String != "service_account" {
            throw FCMConfigurationError(field: "type", "\(source): type is \(type), not service_account; use a service account key file")
        }
        func text(_ field: String) throws(FCMConfigurationError) -> String {
            guard let value = fields[field] else { throw FCMConfigurationError(field: field, "\(source) has no \(field)") }
            guard let text = value as? String, !text.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw FCMConfigurationError(field: field, "\(source): \(field) is not a non-empty string")
            }
            return text
        }
        projectID = try text("project_id")
        guard projectID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ":" || $0 == ".") }), !projectID.allSatisfy(\.isNumber) else {
            throw FCMConfigurationError(
                field: "project_id", "\(source): project_id \(projectID) is not a project id (letters, digits, dashes; the project number is not it)")
        }
        clientEmail = try text("client_email")
        guard clientEmail.contains("@") else { throw FCMConfigurationError(field: "client_email", "\(source): client_email \(clientEmail) is not an email address") }
        if fields["token_uri"] == nil {
            tokenURI = Self.googleTokenURI
        } else {
            tokenURI = try text("token_uri")
            guard let url = URL(string: tokenURI), url.scheme == "https" || url.scheme == "http", url.host != nil else {
                throw FCMConfigurationError(field: "token_uri", "\(source): token_uri \(tokenURI) is not an http(s) URL")
            }
        }
        privateKeyID = fields["private_key_id"] as? String
        let pem = try text("private_key")
        do {
            privateKey = try Insecure.RSA.PrivateKey(pem: pem)
        } catch {
            throw FCMConfigurationError(field: "private_key", "\(source): private_key is not an RSA private key in PEM of 2048 bits or more")
        }
    }

    /// Reads the key file at `path`.
    public init(path: String) throws(FCMConfigurationError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FCMConfigurationError("cannot read the service account file \(path)")
        }
        try self.init(json: data, source: path)
    }

    /// The public half of the key, for a server (the mock) that checks the grant's signature.
    public var publicKeyPEM: String { privateKey.publicKey.pemRepresentation }
}
