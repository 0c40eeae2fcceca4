import APNs
import APNsHTTP2
import ArgumentParser
import CommandLineSupport
import Foundation
import Logging
import PushWorker

/// Broadcast channels of an app, on APNs' channel management API (its own hosts: sandbox port
/// 2195, production 2196), with the app's credentials from the configuration and, for a token
/// app, the fleet's provider token for its key (agreed on through the broker, as the workers do). A job with
/// `audience: {channel: ID}` then updates every Live Activity subscribed to the channel.
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Create, list, show and delete an app's broadcast channels (Live Activities, iOS 18).",
        subcommands: [Create.self, List.self, Show.self, Delete.self])

    struct AppOptions: ParsableArguments {
        @Option(help: "The worker's configuration file (YAML).") var config: String
        @Option(help: "App name from the configuration; optional when it has one app.") var app: String?

        /// Runs `body` with the app's channel manager and bundle id, the manager presenting APNs
        /// the fleet's provider token for the app's key (`FleetTokenMembership`), as the workers do.
        func withManager(_ body: (any ChannelManaging, _ bundleID: String) async throws -> Void) async throws {
            let plan = try WorkerPlan.load(file: config)
            let app = try plan.chosenApp(self.app)
            var logger = Logger(label: "pushworker.channels")
            logger.logLevel = .warning
            let membership: FleetTokenMembership?
            do { membership = try await FleetTokenMembership.join(plan, app: app, connectionName: "pushworker channels", logger: logger) } catch {
                throw CommandFailure("\(error)")
            }
            let manager = APNsChannelManager(configuration: app.client)
            do {
                try await body(manager, app.bundleID)
            } catch {
                manager.shutdown()
                await membership?.leave()
                throw error
            }
            manager.shutdown()
            await membership?.leave()
        }
    }

    /// APNs' refusal as one line an operator can act on; exit status 1.
    static func failure(_ error: APNsChannelError) -> CommandFailure {
        CommandFailure("APNs: \(error)")
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a channel and print its id.")
        @OptionGroup var options: AppOptions
        @Option(name: .customLong("storage-policy"),
            help: "most_recent: APNs keeps the last broadcast for devices that subscribe later (default); none: nothing is kept, and broadcasts must expire immediately.")
        var storagePolicy = "most_recent"

        func run() async throws {
            guard let policy = APNsChannelStoragePolicy(name: storagePolicy) else {
                throw ValidationError("--storage-policy must be most_recent or none")
            }
            try await options.withManager { manager, bundleID in
                do throws(APNsChannelError) {
                    print(try await manager.create(bundleID: bundleID, storagePolicy: policy).id)
                } catch { throw ChannelsCommand.failure(error) }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the app's channel ids, one a line.")
        @OptionGroup var options: AppOptions

        func run() async throws {
            try await options.withManager { manager, bundleID in
                do throws(APNsChannelError) {
                    for id in try await manager.channels(bundleID: bundleID) { print(id) }
                } catch { throw ChannelsCommand.failure(error) }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a channel's storage policy.")
        @OptionGroup var options: AppOptions
        @Argument(help: "The channel id (base64, as create printed it).") var channel: String

        func run() async throws {
            try await options.withManager { manager, bundleID in
                do throws(APNsChannelError) {
                    let found = try await manager.channel(bundleID: bundleID, id: channel)
                    print("channel: \(found.id)")
                    print("storage_policy: \(found.storagePolicy?.name ?? "unknown")")
                } catch { throw ChannelsCommand.failure(error) }
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel: its subscribers get no more broadcasts.")
        @OptionGroup var options: AppOptions
        @Argument(help: "The channel id.") var channel: String

        func run() async throws {
            try await options.withManager { manager, bundleID in
                do throws(APNsChannelError) {
                    try await manager.delete(bundleID: bundleID, id: channel)
                    print("deleted: \(channel)")
                } catch { throw ChannelsCommand.failure(error) }
            }
        }
    }
}
