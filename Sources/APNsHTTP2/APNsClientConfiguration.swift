import APNs

/// Where and how to reach APNs, and how hard to push.
public struct APNsClientConfiguration: Sendable {
    public enum Environment: String, Sendable, Hashable, CaseIterable, Codable {
        case production, sandbox

        public var host: String {
            self == .production ? "api.push.apple.com" : "api.sandbox.push.apple.com"
        }

        /// The broadcast channel management service's host (``APNsChannelManager``).
        public var managementHost: String {
            self == .production ? "api-manage-broadcast.push.apple.com" : "api-manage-broadcast.sandbox.push.apple.com"
        }

        /// Its port: Apple serves channel management on 2196 (production) and 2195 (sandbox) only.
        public var managementPort: Int {
            self == .production ? 2196 : 2195
        }
    }

    public enum Authentication: Sendable {
        /// Provider tokens (a .p8 key): one shared token per key, sent as `authorization: bearer`.
        case token(ProviderTokenSource)
        /// A client certificate as the TLS identity.
        case certificate(APNsCertificateIdentity)
        /// None of its own: the caller puts its authorization in each request's headers (FCM's
        /// OAuth2 bearer token, which this engine carries too).
        case none
    }

    /// The app this client sends for, as its metrics name it.
    public var name = "apns"
    /// The HTTP/2 engine.
    public var transport: APNsTransport = .nghttp2
    /// `https://host:port` of the service; see ``init(environment:port:authentication:)``.
    public var baseURL: String
    /// `https://host:port` of the broadcast channel management service (``APNsChannelManager``):
    /// the environment's management host, or for a mock the base URL unless set.
    public var managementURL: String
    public var authentication: Authentication
    /// Connections to open, all shared by every request of this client.
    public var connections = 2
    /// Our own cap on streams per connection; the server's SETTINGS_MAX_CONCURRENT_STREAMS
    /// (1 until APNs has accepted a request, then 1000) applies on top.
    public var maxConcurrentStreams = 1000
    public var requestTimeout: Duration = .seconds(15)
    public var connectTimeout: Duration = .seconds(10)
    /// Extra PEM CA file to trust (the mock's); nil uses the system store.
    public var caFile: String?
    /// `http://proxy:port` or `https://proxy:port`; APNs traffic goes through a CONNECT tunnel.
    public var proxy: String?
    /// nghttp2 transport: a PING goes out after this long without a frame from the server, so
    /// an idle connection stays open through NATs and APNs' idle timeout, and a dead one is found
    /// before a notification waits on it. nil sends none (the curl transport never does).
    public var pingInterval: Duration? = .seconds(60)
    /// A PING unanswered this long marks the connection dead: its requests are retried on a new one.
    public var pingTimeout: Duration = .seconds(10)
    /// Sends after a GOAWAY, a refused stream or a dropped connection are retried on a fresh
    /// connection this many times before the error reaches the caller.
    public var transportRetries = 3

    public init(environment: Environment, port: Int = 443, authentication: Authentication) {
        self.baseURL = "https://\(environment.host):\(port)"
        self.managementURL = "https://\(environment.managementHost):\(environment.managementPort)"
        self.authentication = authentication
    }

    /// For a mock or a proxying gateway: `https://127.0.0.1:2197`.
    public init(baseURL: String, authentication: Authentication) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        // A mock that serves both APIs on one port works with no more configuration.
        self.managementURL = self.baseURL
        self.authentication = authentication
    }
}

/// A TLS client identity for certificate authentication.
public struct APNsCertificateIdentity: Sendable, Hashable {
    public enum Format: String, Sendable, Hashable { case p12 = "P12", pem = "PEM" }

    public var certificateFile: String
    public var format: Format
    /// The key file for PEM; nil when the key is in the certificate file (always for .p12).
    public var keyFile: String?
    /// The .p12 or key password; never logged.
    public var password: String?

    public init(certificateFile: String, format: Format, keyFile: String? = nil, password: String? = nil) {
        self.certificateFile = certificateFile
        self.format = format
        self.keyFile = keyFile
        self.password = password
    }
}
