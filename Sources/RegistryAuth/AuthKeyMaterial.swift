import Foundation
import JWTKit
import SecretEnvironment

/// The keys `registry.auth` verifies users' tokens with, read and parsed before anything
/// connects, so a wrong file fails the start (and `config check`) naming the key.
public enum AuthKeyMaterial: Sendable {
    /// A PEM public key: ES256 (P-256) or RSA (RS256).
    case publicKey(pem: String)
    /// A JSON Web Key Set, as an identity provider publishes it (`kid` picks the key).
    case jwks(json: String)
    /// An HS256 shared secret, from an environment variable.
    case hs256(secret: String)

    /// Why a key source cannot be used: the configuration key at fault and what is wrong.
    public struct Problem: Error, Sendable {
        public let key: String
        public let message: String
    }

    /// Reads the one source named. `keyFile` and `jwksFile` are paths; `secretVariable` names an
    /// environment variable.
    public static func load(
        keyFile: String?, jwksFile: String?, secretVariable: String?, environment: [String: String]
    ) throws(Problem) -> AuthKeyMaterial {
        let named = [keyFile.map { _ in "key_file" }, jwksFile.map { _ in "jwks_file" }, secretVariable.map { _ in "hs256_secret_env" }].compactMap { $0 }
        guard named.count == 1 else {
            throw Problem(key: "registry.auth", message: named.isEmpty
                ? "names no key: give key_file (a PEM public key), jwks_file or hs256_secret_env"
                : "names \(named.joined(separator: " and ")); give one")
        }
        if let keyFile {
            let pem: String
            do { pem = try String(contentsOfFile: keyFile, encoding: .utf8) } catch {
                throw Problem(key: "registry.auth.key_file", message: "cannot read '\(keyFile)': \(error.localizedDescription)")
            }
            guard (try? ES256PublicKey(pem: pem)) != nil || (try? Insecure.RSA.PublicKey(pem: pem)) != nil else {
                throw Problem(key: "registry.auth.key_file", message: "'\(keyFile)' is not a PEM public key of P-256 (ES256) or RSA of 2048 bits or more (RS256)")
            }
            return .publicKey(pem: pem)
        }
        if let jwksFile {
            let json: String
            do { json = try String(contentsOfFile: jwksFile, encoding: .utf8) } catch {
                throw Problem(key: "registry.auth.jwks_file", message: "cannot read '\(jwksFile)': \(error.localizedDescription)")
            }
            guard let set = try? JSONDecoder().decode(JWKS.self, from: Data(json.utf8)), !set.keys.isEmpty else {
                throw Problem(key: "registry.auth.jwks_file", message: "'\(jwksFile)' is not a JSON Web Key Set ({\"keys\": [...]}) with a key")
            }
            return .jwks(json: json)
        }
        let variable = secretVariable ?? ""
        let value: String?
        do { value = try SecretEnvironment.value(of: variable, in: environment) } catch {
            throw Problem(key: "registry.auth.hs256_secret_env", message: error.message)
        }
        guard let secret = value, secret.utf8.count >= 32 else {
            throw Problem(key: "registry.auth.hs256_secret_env", message: value == nil
                ? "environment variable \(variable) is not set (nor \(variable)_FILE)"
                : "the secret in \(variable) is shorter than 32 bytes, too short for HS256")
        }
        return .hs256(secret: secret)
    }
}
