import APNs
import APNsHTTP2
import Logging

/// How the assembly makes an app's APNs parts from its client configuration: the HTTP/2 client
/// and channel manager in a worker, scripted ones in a test of the assembly. The only place the
/// worker's services meet the transport module.
public struct APNsParts: Sendable {
    public var sender: @Sendable (APNsClientConfiguration, Logger) -> any OwnedNotificationSender
    public var channels: @Sendable (APNsClientConfiguration) -> any ChannelManaging

    public init(
        sender: @escaping @Sendable (APNsClientConfiguration, Logger) -> any OwnedNotificationSender,
        channels: @escaping @Sendable (APNsClientConfiguration) -> any ChannelManaging
    ) {
        self.sender = sender
        self.channels = channels
    }

    /// libnghttp2 or libcurl, as each app's `transport` says.
    public static let http2 = APNsParts(
        sender: { APNsClient(configuration: $0, logger: $1) }, channels: { APNsChannelManager(configuration: $0) })
}
