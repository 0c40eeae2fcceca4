import APNs
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A faithful stand-in for APNs: HTTP/2 over TLS, the same validation and answers, provider-token
/// and certificate authentication, APNs' stream-limit behaviour, injectable faults, and a record
/// of every accepted notification; Live Activity broadcasts and the channel management API too.
public final class MockAPNsServer: Sendable {
    /// What the stream handlers need, shared by every connection.
    struct Shared: Sendable {
        let configuration: MockAPNsConfiguration
        let state: MockAPNsState
        let validator: MockRequestValidator
        let channels: MockChannelService
        /// FCM HTTP v1's endpoints; nil when no service account is configured.
        let fcm: MockFCMService?
        /// The management API is served on the main listener (no `managementPort`).
        let managementOnMainListener: Bool
    }

    public let port: Int
    /// Port of the plain-HTTP report endpoint, when configured.
    public let reportPort: Int?
    /// Port of the channel management listener, when `managementPort` was configured; nil when
    /// the main listener serves management too.
    public let managementPort: Int?
    private let shared: Shared
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    private let reportChannel: Channel?
    private let managementChannel: Channel?

    private init(
        port: Int, reportPort: Int?, managementPort: Int?, shared: Shared, group: MultiThreadedEventLoopGroup, channel: Channel,
        reportChannel: Channel?, managementChannel: Channel?
    ) {
        self.port = port
        self.reportPort = reportPort
        self.managementPort = managementPort
        self.shared = shared
        self.group = group
        self.channel = channel
        self.reportChannel = reportChannel
        self.managementChannel = managementChannel
    }

    public static func start(_ configuration: MockAPNsConfiguration) async throws -> MockAPNsServer {
        var keys: [String: (teamID: String, key: ES256Key)] = [:]
        for (keyID, entry) in configuration.providerKeys {
            keys[keyID] = (entry.teamID, try ES256Key.publicKey(pem: entry.publicKeyPEM))
        }
        let state = MockAPNsState(configuration: configuration)
        let validator = MockRequestValidator(keys: keys, topics: configuration.topics)
        let shared = Shared(
            configuration: configuration, state: state, validator: validator,
            channels: MockChannelService(validator: validator, state: state, maxChannels: configuration.maxChannels),
            fcm: configuration.fcmAccounts.isEmpty
                ? nil : try MockFCMService(accounts: configuration.fcmAccounts, state: state, tokenLifetime: configuration.fcmTokenLifetime),
            managementOnMainListener: configuration.managementPort == nil)

        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(configuration.certificateFile).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: configuration.privateKeyFile, format: .pem)))
        tls.applicationProtocols = ["h2"]
        if let clientCA = configuration.clientCAFile {
            tls.certificateVerification = .optionalVerification
            tls.trustRoots = .file(clientCA)
        }
        let sslContext = try NIOSSLContext(configuration: tls)

        let group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.threads)
        func listen(port: Int, managementOnly: Bool) async throws -> Channel {
            try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // At the TCP level: `.socketOption(.tcp_nodelay)` is SOL_SOCKET option 1, which is
                // SO_DEBUG, refused in a container (EACCES) and so every connection closed at once.
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try Self.configure(channel, sslContext: sslContext, shared: shared, managementOnly: managementOnly)
                    }
                }
                .bind(host: configuration.host, port: port).get()
        }
        do {
            let channel = try await listen(port: configuration.port, managementOnly: false)
            var reportChannel: Channel?
            var managementChannel: Channel?
            do {
                if let reportPort = configuration.reportPort {
                    reportChannel = try await MockReportServer.bind(group: group, host: configuration.host, port: reportPort, state: shared.state)
                }
                if let managementPort = configuration.managementPort {
                    managementChannel = try await listen(port: managementPort, managementOnly: true)
                }
            } catch {
                try? await channel.close()
                try? await reportChannel?.close()
                throw error
            }
            return MockAPNsServer(
                port: channel.localAddress?.port ?? configuration.port, reportPort: reportChannel?.localAddress?.port,
                managementPort: managementChannel?.localAddress?.port, shared: shared, group: group, channel: channel,
                reportChannel: reportChannel, managementChannel: managementChannel)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private static func configure(_ channel: Channel, sslContext: NIOSSLContext, shared: Shared, managementOnly: Bool) throws {
        let connection = MockConnection(number: shared.state.newConnectionNumber())
        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
        var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
        // libcurl ends each upload with an empty DATA frame; under load several of those arrive
        // back to back, which NIO's flood protection (default: 1) answers with ENHANCE_YOUR_CALM.
        connectionConfiguration.maximumSequentialEmptyDataFrames = 100_000
        connectionConfiguration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 1),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 8192),
        ]
        // libcurl also resets streams it has finished with when its bookkeeping ran ahead of the
        // stream's close; NIO's default (200 resets in 30 s) would take that for an attack.
        var streamConfiguration = NIOHTTP2Handler.StreamConfiguration()
        streamConfiguration.streamResetFrameRateLimit.maximumCount = 10_000_000
        streamConfiguration.streamErrorRateLimit.maximumCount = 10_000_000
        _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
            mode: .server, connectionConfiguration: connectionConfiguration,
            streamConfiguration: streamConfiguration
        ) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandlers([
                    HTTP2FramePayloadToHTTP1ServerCodec(),
                    MockStreamHandler(connection: connection, server: shared, managementOnly: managementOnly),
                ])
            }
        }
        // Last, so it sees the errors the HTTP/2 handler raises as well as TLS ones.
        try channel.pipeline.syncOperations.addHandler(ConnectionErrorHandler(connection: connection.number, state: shared.state))
    }

    public func shutdown() async throws {
        try await channel.close()
        try? await reportChannel?.close()
        try? await managementChannel?.close()
        try await group.shutdownGracefully()
    }

    /// `https://127.0.0.1:PORT`
    public var url: String { "https://\(shared.configuration.host):\(port)" }

    /// Where the channel management API is served: the management listener, or `url`.
    public var managementURL: String { "https://\(shared.configuration.host):\(managementPort ?? port)" }

    /// Every broadcast accepted so far, in answer order.
    public var broadcasts: [RecordedBroadcast] { shared.state.broadcasts }

    /// The channels that exist now: bundle id → channel id → storage policy.
    public var channels: [String: [String: APNsChannelStoragePolicy]] { shared.state.channels }

    /// Replaces every channel (as `MockAPNsConfiguration.channels` seeds them).
    public func setChannels(_ channels: [String: [String: APNsChannelStoragePolicy]]) { shared.state.setChannels(channels) }

    /// Every notification accepted so far, in answer order.
    public var recorded: [RecordedNotification] { shared.state.recorded }

    /// Every distinct provider token accepted so far (pushes, broadcasts, channel management), in
    /// first-use order: how many tokens a client signed for its keys.
    public var providerTokens: [String] { shared.state.providerTokens }

    /// Messages FCM accepted, in order.
    public var fcmMessages: [RecordedFCMMessage] { shared.state.fcmMessages }
    /// Access tokens the FCM token endpoint issued, and grants it refused.
    public var fcmGrants: (issued: Int, refused: Int) { shared.state.fcmGrants }
    /// Every access token issued so far is refused from now on (401), as after a key's revocation.
    public func revokeFCMTokens() { shared.state.revokeFCMTokens() }
    /// From now on, this Android token answers 404 UNREGISTERED (the app was uninstalled).
    public func unregisterFCM(_ token: String) { shared.state.markFCMUnregistered(token) }

    /// How many notifications each device got.
    public var deliveryCounts: [String: Int] {
        recorded.reduce(into: [:]) { $0[$1.token, default: 0] += 1 }
    }

    /// Forgets the recorded notifications and broadcasts.
    public func clearRecorded() { shared.state.clearRecorded() }

    /// Requests received, answered or not, accepted or not.
    public var requestCount: Int { shared.state.requests }

    /// Errors connections failed with (TLS, HTTP/2 protocol), newest last.
    public var connectionErrors: [String] { shared.state.errors }

    /// The most requests the server had open at once, across connections.
    public var peakConcurrentRequests: Int { shared.state.peakInFlight }

    /// Connections accepted since start.
    public var connectionCount: Int { shared.state.connections }

    public func setFaults(_ faults: [MockAPNsFault]) { shared.state.setFaults(faults) }

    /// Makes a token answer 410 Unregistered (or valid again with nil).
    public func setUnregistered(_ token: String, since: Date?) { shared.state.setUnregistered(token, since: since) }
}

/// Remembers why connections failed, so a test can tell a protocol error from a planned fault.
final class ConnectionErrorHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any
    let connection: Int
    let state: MockAPNsState

    init(connection: Int, state: MockAPNsState) {
        self.connection = connection
        self.state = state
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        state.recordError("connection \(connection): \(error)")
        context.fireErrorCaught(error)
    }
}
