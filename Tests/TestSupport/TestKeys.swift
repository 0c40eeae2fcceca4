import Foundation

/// Keys and certificates made fresh by the `openssl` command for each test run; none is committed.
public enum TestKeys {
    /// A new EC P-256 private key as PKCS#8 PEM, the format of Apple's .p8 files.
    public static func newP8() throws -> String {
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
    }

    /// A directory holding a fresh CA, a server certificate for localhost/127.0.0.1, and a client
    /// certificate (PEM and .p12 with password "test") signed by the same CA.
    public static func newPKI() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushworker-pki-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
        try Data("subjectAltName=DNS:localhost,IP:127.0.0.1\n".utf8).write(to: dir.appendingPathComponent("san.ext"))
        _ = try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=pushworker test CA", "-keyout", path("ca.key"), "-out", path("ca.pem")])
        for (name, subject, extensions) in [("server", "/CN=localhost", true), ("client", "/CN=com.example.app/UID=com.example.app", false)] {
            _ = try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", subject,
                "-keyout", path("\(name).key"), "-out", path("\(name).csr")])
            _ = try openssl(["x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-days", "2", "-out", path("\(name).pem")] + (extensions ? ["-extfile", path("san.ext")] : []))
        }
        _ = try openssl(["pkcs12", "-export", "-in", path("client.pem"), "-inkey", path("client.key"), "-passout", "pass:test",
            "-out", path("client.p12")])
        return dir
    }

    /// A new 2048-bit RSA private key (PKCS#8 PEM), made on a thread of its own: key generation
    /// can take a second on a loaded machine, and a test awaiting it holds no thread of Swift's
    /// cooperative pool meanwhile.
    public static func newRSAKey() async throws -> String {
        let result = try await Program.running(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], program: URL(fileURLWithPath: "/usr/bin/openssl"))
        guard result.status == 0 else { throw TestFailure("openssl genpkey failed: \(result.standardError)") }
        return result.standardOutput
    }

    @discardableResult
    public static func openssl(_ arguments: [String], input: Data? = nil) throws -> String {
        let result = try Program.run(arguments, input: input ?? Data(), program: URL(fileURLWithPath: "/usr/bin/openssl"))
        guard result.status == 0 else {
            throw TestFailure("openssl \(arguments.joined(separator: " ")) failed: \(result.standardError)\(result.standardOutput)")
        }
        return result.standardOutput
    }

    /// The DER form of a raw r||s ECDSA signature, which `openssl dgst -verify` expects.
    public static func derSignature(_ raw: [UInt8]) -> [UInt8] {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(raw[0..<32]) + integer(raw[32..<64])
        return [0x30, UInt8(body.count)] + body
    }
}
