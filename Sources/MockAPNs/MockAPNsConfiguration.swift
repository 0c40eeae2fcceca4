import APNs
import Foundation

/// How the mock server behaves: where it listens, which credentials and topics it accepts, and
/// what it pretends about devices.
public struct MockAPNsConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port; read the real one from ``MockAPNsServer/port``.
    public var port = 0
    /// PEM server certificate (chain) and key for TLS.
    public var certificateFile: String
    public var privateKeyFile: String
    /// PEM CA whose client certificates are accepted for certificate auth; nil disables it.
    public var clientCAFile: String?
    /// Provider-token keys: key id → team id and PEM public key.
    public var providerKeys: [String: (teamID: String, publicKeyPEM: String)] = [:]
    /// Topics a request may name; empty accepts any.
    public var topics: Set<String> = []
    /// Streams allowed per connection once a request has been accepted. Until then the server
    /// allows one, as APNs does.
    public var maxConcurrentStreams: Int = 1000
    /// Sandbox answers carry `apns-unique-id`, as the development service does.
    public var sandbox = true
    /// Tokens that answer 410 Unregistered, with the time APNs last saw them valid.
    public var unregisteredTokens: [String: Date] = [:]
    public var faults: [MockAPNsFault] = []
    /// Port of the plain-HTTP report endpoint; nil for none, 0 for a free one.
    public var reportPort: Int?
    /// Event loop threads.
    public var threads = 1
    /// Where the broadcast channel management API (`/1/apps/…`) is served: nil on the main
    /// listener beside the pushes (what a client with `managementURL` = `baseURL` reaches), or
    /// a second TLS listener on this port (0 for a free one: ``MockAPNsServer/managementPort``),
    /// which then serves management only, as Apple's separate hosts do.
    public var managementPort: Int?
    /// Broadcast channels that exist from the start: bundle id → channel id → storage policy.
    public var channels: [String: [String: APNsChannelStoragePolicy]] = [:]
    /// Channels one bundle id may have; a create past it answers CannotCreateChannelConfig.
    public var maxChannels = 10_000

    /// FCM HTTP v1 beside APNs on the same listener (``MockFCMService``): the service accounts
    /// whose grants the token endpoint takes (none: FCM is not served).
    public var fcmAccounts: [MockFCMAccount] = []
    /// Android registration tokens that answer 404 UNREGISTERED.
    public var fcmUnregisteredTokens: Set<String> = []
    /// Failures FCM answers per registration token.
    public var fcmFailures: [String: MockFCMFailure] = [:]
    /// Seconds an access token from the token endpoint is good for (Google's: 3599).
    public var fcmTokenLifetime = 3599
    /// Grant requests the token endpoint answers 503 before it grants again: Google's endpoint
    /// briefly unwell, which callers are to ride out.
    public var fcmTokenEndpointOutages = 0

    public init(certificateFile: String, privateKeyFile: String) {
        self.certificateFile = certificateFile
        self.privateKeyFile = privateKeyFile
    }
}
