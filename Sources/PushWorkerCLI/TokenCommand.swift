import APNs
import ArgumentParser
import CommandLineSupport
import Foundation

/// Prints a provider token, for trying APNs (or the mock) by hand with curl or h2load.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print an APNs provider token (ES256 JWT) signed with a .p8 key.",
        discussion: "The token is a credential for an hour: keep it out of logs and shell history.")

    @Option(name: .customLong("key-file"), help: "The .p8 key file.") var keyFile: String
    @Option(name: .customLong("key-id"), help: "The key's id (10 characters, from the developer account).") var keyID: String
    @Option(name: .customLong("team-id"), help: "The team id.") var teamID: String

    func run() async throws {
        let pem: String
        do {
            pem = try String(contentsOfFile: keyFile, encoding: .utf8)
        } catch {
            throw CommandFailure("cannot read the key file '\(keyFile)': \(error.localizedDescription)")
        }
        let key = try ES256Key.privateKey(pem: pem)
        print(try ProviderToken.sign(keyID: keyID, teamID: teamID, issuedAt: Date(), key: key).jwt)
    }
}
