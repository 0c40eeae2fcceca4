import COpenSSL
import Foundation

/// An EC P-256 key held by OpenSSL, freed when the last reference goes.
///
/// The handle is never mutated after loading, and OpenSSL allows concurrent signing and
/// verification with one EVP_PKEY, so sharing across tasks is safe.
public final class ES256Key: @unchecked Sendable {
    let handle: OpaquePointer
    public let isPrivate: Bool

    private init(handle: OpaquePointer, isPrivate: Bool) {
        self.handle = handle
        self.isPrivate = isPrivate
    }

    deinit {
        pw_es256_free(handle)
    }

    /// Loads a private key from PEM text, as in Apple's `AuthKey_XXXXXXXXXX.p8` files.
    public static func privateKey(pem: String) throws(APNsCredentialError) -> ES256Key {
        try load(pem, isPrivate: true)
    }

    /// Loads a public key (`-----BEGIN PUBLIC KEY-----`).
    public static func publicKey(pem: String) throws(APNsCredentialError) -> ES256Key {
        try load(pem, isPrivate: false)
    }

    private static func load(_ pem: String, isPrivate: Bool) throws(APNsCredentialError) -> ES256Key {
        var error = [CChar](repeating: 0, count: 256)
        let bytes = Array(pem.utf8)
        let handle = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { text in
                isPrivate
                    ? pw_es256_load_private_pem(text.baseAddress, text.count, &error, error.count)
                    : pw_es256_load_public_pem(text.baseAddress, text.count, &error, error.count)
            }
        }
        guard let handle else {
            let reason = Self.text(error)
            throw APNsCredentialError("cannot load the \(isPrivate ? "private" : "public") key: \(reason)")
        }
        return ES256Key(handle: handle, isPrivate: isPrivate)
    }

    /// Signs with SHA-256, returning the JWS form: raw r||s, 64 bytes.
    public func sign(_ message: [UInt8]) throws(APNsCredentialError) -> [UInt8] {
        precondition(isPrivate, "signing needs a private key")
        var signature = [UInt8](repeating: 0, count: 64)
        var error = [CChar](repeating: 0, count: 256)
        let ok = message.withUnsafeBufferPointer { pw_es256_sign(handle, $0.baseAddress, $0.count, &signature, &error, error.count) }
        guard ok == 1 else { throw APNsCredentialError("ES256 signing failed: \(Self.text(error))") }
        return signature
    }

    /// Whether `signature` (raw r||s) signs `message`.
    public func verify(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard signature.count == 64 else { return false }
        return message.withUnsafeBufferPointer { pw_es256_verify(handle, $0.baseAddress, $0.count, signature) } == 1
    }

    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The public half as PEM, for configuring a verifier (the mock APNs) from a .p8 file.
    public var publicKeyPEM: String {
        let needed = pw_es256_public_pem(handle, nil, 0)
        var buffer = [CChar](repeating: 0, count: needed)
        _ = pw_es256_public_pem(handle, &buffer, needed)
        return String(decoding: buffer.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Credentials that cannot be used: a key that does not load, a missing file, a bad password.
public struct APNsCredentialError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
