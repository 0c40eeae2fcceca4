import Foundation

/// The one way broadcast channels are managed: the registry service's channel requests and
/// `pushworker channels` go through this, so neither imports the transport module and tests can
/// stand a scripted manager in. `APNsChannelManager` (APNsHTTP2) is the real one.
public protocol ChannelManaging: Sendable {
    /// A new channel, its id as APNs assigned it.
    func create(bundleID: String, storagePolicy: APNsChannelStoragePolicy, requestID: UUID?) async throws(APNsChannelError) -> APNsChannel
    /// The channel and its storage policy.
    func channel(bundleID: String, id: String) async throws(APNsChannelError) -> APNsChannel
    /// Every channel id of the app in this environment.
    func channels(bundleID: String) async throws(APNsChannelError) -> [String]
    func delete(bundleID: String, id: String) async throws(APNsChannelError)
    /// Refuses further calls; those under way finish.
    func shutdown()
}

extension ChannelManaging {
    public func create(bundleID: String, storagePolicy: APNsChannelStoragePolicy) async throws(APNsChannelError) -> APNsChannel {
        try await create(bundleID: bundleID, storagePolicy: storagePolicy, requestID: nil)
    }
}
