import ArgumentParser
import Foundation
import PushWorker
import Registry

/// The registry for operators, straight on the configured store (no broker): apply commands one
/// by one or from a file, and look a device up.
struct RegistryCommandLine: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registry",
        abstract: "Apply registry commands to the configured store, import them from a file, look a device up.",
        subcommands: [Apply.self, Import.self, Status.self])

    struct Store: ParsableArguments {
        @Option(help: "The worker's configuration file; its registry: is used.") var config: String

        func open() throws -> any RegistryStore {
            let configuration = try PushWorkerConfiguration.load(file: config)
            guard let store = try configuration.openRegistryStore(file: config) else {
                throw CommandFailure("\(config) configures no registry; add registry: {sqlite: FILE}")
            }
            return store
        }
    }

    struct Apply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply one command, such as '{\"command\": \"add_to_group\", \"user\": \"u-1\", \"group\": \"staff\"}'.")
        @OptionGroup var store: Store
        @Argument(help: "The command as JSON (docs/registry.md).") var command: String

        func run() async throws {
            let parsed = try RegistryCommand(json: Array(command.utf8))
            try await store.open().apply(parsed)
            print("ok: \(parsed.name)")
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply a file of commands, one JSON object a line, in transactions of --batch lines.",
            discussion: "Every line is checked before anything is applied; a bad line is named and nothing is imported.")
        @OptionGroup var store: Store
        @Argument(help: "The file (JSON lines).") var file: String
        @Option(help: "Commands per transaction.") var batch = 1000

        func run() async throws {
            guard batch > 0 else { throw ValidationError("--batch must be at least 1") }
            let text = try String(contentsOfFile: file, encoding: .utf8)
            var commands: [RegistryCommand] = []
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where !line.trimmingCharacters(in: .whitespaces).isEmpty {
                do { commands.append(try RegistryCommand(json: Array(line.utf8))) } catch {
                    throw CommandFailure("\(file):\(index + 1): \(error)")
                }
            }
            let target = try store.open()
            var done = 0
            for start in stride(from: 0, to: commands.count, by: batch) {
                let slice = Array(commands[start..<min(start + batch, commands.count)])
                do { try await target.apply(batch: slice) } catch {
                    throw CommandFailure("after \(done) of \(commands.count) commands: \(error)")
                }
                done += slice.count
                print("imported \(done) of \(commands.count)")
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Whether a device is registered, whose it is, and whether a notification type reaches it.")
        @OptionGroup var store: Store
        @Argument(help: "The app.") var app: String
        @Argument(help: "The device token (hex).") var token: String
        @Option(help: "A notification type to check the owner's preferences against.") var type: String?
        @Option(help: "Its subtype.") var subtype: String?

        func run() async throws {
            let registry = try store.open()
            guard let device = try await registry.device(app: app, token: token.lowercased()) else {
                print("\(app) \(token.lowercased()): not registered (or marked invalid)")
                return
            }
            print("\(app) \(device.token): registered, user \(device.user ?? "none")")
            if let type, let user = device.user {
                let preferences = try await registry.preferences(of: [user])[user] ?? .none
                let verdict = preferences.allows(type: type, subtype: subtype) ? "reaches it" : "is filtered by \(user)'s preferences"
                print("type \(type)\(subtype.map { "/\($0)" } ?? ""): \(verdict)")
            }
        }
    }
}
