import APNs
import APNsHTTP2
import ArgumentParser
import CommandLineSupport
import Foundation
import PushWorker

/// Broadcast channels of an app, on APNs' channel management API (its own hosts: sandbox port
/// 2195, production 2196), with the app's credentials from the configuration. A job with
/// `audience: {channel: ID}` then updates every Live Activity subscribed to the channel.
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Create, list, show and delete an app's broadcast channels (Live Activities, iOS 18).",
        subcommands: [Create.self, List.self, Show.self, Delete.self])

    struct AppOptions: ParsableArguments {
        @Option(help: "The worker's configuration file (YAML).") var config: String
        @Option(help: "App name from the configuration; optional when it has one app.") var app: String?

        /// The app's channel manager and bundle id (its topic without a push-type suffix).
        func manager() throws -> (APNsChannelManager, bundleID: String) {
            let configuration = try PushWorkerConfiguration.load(file: config)
            let (index, appConfiguration) = try configuration.chosenApp(app, file: config)
            let client = try appConfiguration.clientConfiguration(file: config, index: index)
            return (APNsChannelManager(configuration: client), ChannelDirectory.bundleID(appConfiguration.topic))
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
            let (manager, bundleID) = try options.manager()
            defer { manager.shutdown() }
            do {
                let channel = try await manager.create(bundleID: bundleID, storagePolicy: policy)
                print(channel.id)
            } catch { throw ChannelsCommand.failure(error) }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the app's channel ids, one a line.")
        @OptionGroup var options: AppOptions

        func run() async throws {
            let (manager, bundleID) = try options.manager()
            defer { manager.shutdown() }
            do {
                for id in try await manager.channels(bundleID: bundleID) { print(id) }
            } catch { throw ChannelsCommand.failure(error) }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a channel's storage policy.")
        @OptionGroup var options: AppOptions
        @Argument(help: "The channel id (base64, as create printed it).") var channel: String

        func run() async throws {
            let (manager, bundleID) = try options.manager()
            defer { manager.shutdown() }
            do {
                let found = try await manager.channel(bundleID: bundleID, id: channel)
                print("channel: \(found.id)")
                print("storage_policy: \(found.storagePolicy?.name ?? "unknown")")
            } catch { throw ChannelsCommand.failure(error) }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel: its subscribers get no more broadcasts.")
        @OptionGroup var options: AppOptions
        @Argument(help: "The channel id.") var channel: String

        func run() async throws {
            let (manager, bundleID) = try options.manager()
            defer { manager.shutdown() }
            do {
                try await manager.delete(bundleID: bundleID, id: channel)
                print("deleted: \(channel)")
            } catch { throw ChannelsCommand.failure(error) }
        }
    }
}
