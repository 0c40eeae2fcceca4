import APNs
import ArgumentParser
import CommandLineSupport
import Foundation
import Logging
import PushWorker
import Stores

/// The registry for operators, straight on the configured store (no broker): apply commands one
/// by one or from a file, look a device up, show a user, device or group.
struct RegistryCommandLine: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registry",
        abstract: "Apply registry commands to the configured store, import them from a file, look a device, user or group up.",
        subcommands: [Apply.self, Import.self, Status.self, Show.self])

    struct Store: ParsableArguments {
        @Option(help: "The worker's configuration file; its registry: is used.") var config: String

        func open() async throws -> any RegistryStore {
            let configuration = try PushWorkerConfiguration.load(file: config)
            var logger = Logger(label: "pushworker.registry")
            logger.logLevel = .warning
            guard let store = try await configuration.openRegistryStore(file: config, logger: logger) else {
                throw CommandFailure("\(config) configures no registry; add registry: {sqlite: FILE} or {postgres: URL}")
            }
            return store
        }

        /// The apps the configuration serves: a device for another one is refused, as the worker does.
        func servedApps() throws -> Set<String> {
            Set(try PushWorkerConfiguration.load(file: config).apps.map(\.name))
        }
    }

    struct Apply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply one command, such as '{\"command\": \"add_to_group\", \"user\": \"u-1\", \"group\": \"staff\"}'.")
        @OptionGroup var store: Store
        @Argument(help: "The command as JSON (docs/registry.md).") var command: String

        func run() async throws {
            let parsed = try RegistryCommand(json: Array(command.utf8))
            try parsed.check(servedApps: try store.servedApps())
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
            let apps = try store.servedApps()
            var commands: [RegistryCommand] = []
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where !line.trimmingCharacters(in: .whitespaces).isEmpty {
                do throws(StoreError) {
                    let command = try RegistryCommand(json: Array(line.utf8))
                    try command.check(servedApps: apps)
                    commands.append(command)
                } catch {
                    throw CommandFailure("\(file):\(index + 1): \(error)")
                }
            }
            let target = try await store.open()
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
        @Flag(help: "Print the answer a `status` query over push.registry gets, as JSON.") var json = false

        func run() async throws {
            let status = try await store.open().status(app: app, token: DevicePlatform.normalized(token: token), type: type, subtype: subtype)
            if json {
                let data = try JSONSerialization.data(withJSONObject: status.json, options: [.sortedKeys, .withoutEscapingSlashes])
                print(String(decoding: data, as: UTF8.self))
            } else {
                status.lines.forEach { print($0) }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a user (devices, groups, preferences), a device, or a group (members, devices per app).",
            subcommands: [User.self, Device.self, Group.self])

        struct User: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "A user's devices, groups and preferences.")
            @OptionGroup var store: Store
            @Argument(help: "The user.") var user: String

            func run() async throws {
                guard let found = try await store.open().user(user) else { throw CommandFailure("no user '\(user)' in the registry") }
                print("user \(found.id)")
                print("  devices: \(found.devices.count)")
                for device in found.devices {
                    // A Live Activity token says whose: `news push-to-start 3f1c…`, `news activity A 3f1c…`.
                    let kind = device.namespace == .devices ? "" : " \(device.namespace)"
                    print("    \(device.app)\(kind) \(device.token)\(device.invalid ? " (invalid: APNs refused it)" : "")")
                }
                print("  groups: \(found.groups.isEmpty ? "none" : found.groups.joined(separator: ", "))")
                Show.printPreferences(found.preferences)
            }
        }

        struct Device: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Whether a device is registered, and whose it is.")
            @OptionGroup var store: Store
            @Argument(help: "The app.") var app: String
            @Argument(help: "The device token (hex).") var token: String

            func run() async throws {
                guard let device = try await store.open().device(app: app, token: DevicePlatform.normalized(token: token)) else {
                    throw CommandFailure("\(app) \(DevicePlatform.normalized(token: token)): not registered (or marked invalid)")
                }
                print("device \(app) \(device.token)")
                print("  user: \(device.user ?? "none")")
                if let preferences = device.preferences { Show.printPreferences(preferences) }
            }
        }

        struct Group: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "A group's members and their devices per app.")
            @OptionGroup var store: Store
            @Argument(help: "The group.") var group: String
            @Option(help: "Members to list.") var sample = 20

            func run() async throws {
                guard let found = try await store.open().group(group, sampleSize: max(0, sample)) else {
                    throw CommandFailure("no group '\(group)' in the registry")
                }
                print("group \(found.name)")
                print("  members: \(found.members)")
                print("  devices: \(found.devicesByApp.isEmpty ? "none" : found.devicesByApp.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
                if !found.sample.isEmpty {
                    let more = found.members > found.sample.count ? " (first \(found.sample.count))" : ""
                    print("  members\(more): \(found.sample.joined(separator: ", "))")
                }
            }
        }

        static func printPreferences(_ preferences: NotificationPreferences) {
            print("  whitelist: \(describe(preferences.whitelist))")
            print("  blacklist: \(describe(preferences.blacklist))")
        }

        static func describe(_ map: [String: [String]]) -> String {
            guard !map.isEmpty else { return "empty" }
            return map.sorted { $0.key < $1.key }.map { key, exceptions in
                exceptions.isEmpty ? key : "\(key) (except \(exceptions.joined(separator: ", ")))"
            }.joined(separator: "; ")
        }
    }
}
