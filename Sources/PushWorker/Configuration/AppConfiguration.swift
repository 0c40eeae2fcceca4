import APNs
import APNsHTTP2
import Stores
import Foundation
import SecretEnvironment

/// One APNs app: its name in jobs, default topic, environment and credentials.
public struct AppConfiguration: Sendable, Decodable, Equatable {
    public var name: String
    /// The bundle id; jobs may override it (`<bundle>.voip`).
    public var topic: String
    public var environment: APNsClientConfiguration.Environment
    /// 443 (default) or 2197.
    public var port: Int?
    /// Overrides host and port (a mock or a gateway): `https://127.0.0.1:2197`.
    public var url: String?
    /// Overrides where channel management goes (`pushworker channels`, channel requests): by
    /// default the environment's management host (sandbox port 2195, production 2196), or `url`
    /// when that is set (a mock serves both on one port; a gateway may not).
    public var managementURL: String?
    /// Extra CA to trust (for a mock).
    public var caFile: String?
    public var connections: Int?
    /// Devices of this app in flight at once (default 256). Each costs ~8–12 KiB with the
    /// nghttp2 transport (~23 KiB with curl), so this bounds the worker's memory; 256 at 30 ms per
    /// answer is ~8,500 notifications/s. Raise it for a slower network path.
    public var maxInFlight: Int?
    /// Per-request timeout, milliseconds (default 15000).
    public var requestTimeoutMilliseconds: Int?
    /// `http://host:port` (either transport) or `https://…`/`socks5://…` (curl only): APNs
    /// traffic goes through a CONNECT tunnel.
    public var proxy: String?
    /// The HTTP/2 engine: `nghttp2` (default) or `curl`.
    public var transport: APNsTransport?
    /// nghttp2: PING after this many seconds without a frame from APNs (default 60; 0 for none).
    public var pingIntervalSeconds: Int?
    public var token: TokenCredentials?
    public var certificate: CertificateCredentials?
    /// The app's share of a worker's bulk lane beside other apps' broadcasts (1–100, default 1):
    /// its chunks in hand are `amqp.prefetch` × weight.
    public var weight: Int?
    /// For jobs that name no `expiration`: `immediate`, or seconds after the job was published.
    public var defaultExpiration: DefaultExpiration?
    /// For jobs that name no `results`: the mode its producers expect (e.g. `batched` for an app
    /// whose backend reads every device's result of its broadcasts); nil: `all`.
    public var defaultResults: PushJob.ResultsMode?
    /// The IANA zone of users and devices that have none of their own (quiet hours); nil: UTC.
    public var timeZone: String?
    /// For jobs that name no `quiet_hours`; nil: `defer`.
    public var quietHours: PushJob.QuietHoursMode?
    /// Frequency caps per user and notification type.
    public var caps: [FrequencyCap] = []
    /// The app's Android side: its Firebase project's service account; nil for APNs only.
    public var fcm: FCMSettings?

    public static let defaultMaxInFlight = 256

    /// `max_in_flight`, or its default.
    public var effectiveMaxInFlight: Int { maxInFlight ?? Self.defaultMaxInFlight }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case name, topic, environment, port, url, connections, proxy, transport, token, certificate, weight
        case managementURL = "management_url"
        case pingIntervalSeconds = "ping_interval_seconds"
        case caFile = "ca_file"
        case requestTimeoutMilliseconds = "request_timeout_ms"
        case maxInFlight = "max_in_flight"
        case defaultExpiration = "default_expiration"
        case defaultResults = "default_results"
        case timeZone = "time_zone"
        case quietHours = "quiet_hours"
        case caps, fcm
    }

    public init(from decoder: Decoder) throws {
        try KnownKeys.check(decoder, CodingKeys.self)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        topic = try container.decode(String.self, forKey: .topic)
        environment = try container.decode(APNsClientConfiguration.Environment.self, forKey: .environment)
        port = try container.decodeIfPresent(Int.self, forKey: .port)
        url = try container.decodeIfPresent(String.self, forKey: .url)
        managementURL = try container.decodeIfPresent(String.self, forKey: .managementURL)
        caFile = try container.decodeIfPresent(String.self, forKey: .caFile)
        connections = try container.decodeIfPresent(Int.self, forKey: .connections)
        maxInFlight = try container.decodeIfPresent(Int.self, forKey: .maxInFlight)
        if let maxInFlight, !(1...100_000).contains(maxInFlight) {
            throw DecodingError.dataCorruptedError(forKey: .maxInFlight, in: container, debugDescription: "\(maxInFlight) is not between 1 and 100000")
        }
        requestTimeoutMilliseconds = try container.decodeIfPresent(Int.self, forKey: .requestTimeoutMilliseconds)
        proxy = try container.decodeIfPresent(String.self, forKey: .proxy)
        transport = try container.decodeIfPresent(APNsTransport.self, forKey: .transport)
        pingIntervalSeconds = try container.decodeIfPresent(Int.self, forKey: .pingIntervalSeconds)
        token = try container.decodeIfPresent(TokenCredentials.self, forKey: .token)
        certificate = try container.decodeIfPresent(CertificateCredentials.self, forKey: .certificate)
        weight = try container.decodeIfPresent(Int.self, forKey: .weight)
        defaultExpiration = try container.decodeIfPresent(DefaultExpiration.self, forKey: .defaultExpiration)
        if let text = try container.decodeIfPresent(String.self, forKey: .defaultResults) {
            guard let mode = PushJob.ResultsMode(rawValue: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .defaultResults, in: container, debugDescription: "'\(text)' is not all, batched, failures or none")
            }
            defaultResults = mode
        }
        timeZone = try container.decodeIfPresent(String.self, forKey: .timeZone)
        if let zone = timeZone, (try? TimeZones.checked(zone, field: "time_zone")) == nil {
            throw DecodingError.dataCorruptedError(
                forKey: .timeZone, in: container, debugDescription: "'\(zone)' is not an IANA time zone name (such as Europe/Berlin, America/New_York or UTC)")
        }
        if let text = try container.decodeIfPresent(String.self, forKey: .quietHours) {
            guard let mode = PushJob.QuietHoursMode(rawValue: text) else {
                throw DecodingError.dataCorruptedError(forKey: .quietHours, in: container, debugDescription: "'\(text)' is not defer, drop or ignore")
            }
            quietHours = mode
        }
        caps = try container.decodeIfPresent([FrequencyCap].self, forKey: .caps) ?? []
        fcm = try container.decodeIfPresent(FCMSettings.self, forKey: .fcm)
    }

    public struct TokenCredentials: Sendable, Decodable, Equatable {
        /// Path of the .p8 file…
        public var keyFile: String?
        /// …or the name of an environment variable holding the key's PEM text.
        public var keyEnv: String?
        /// May be left out when `key_file` is named as Apple delivers it, `AuthKey_<KEY_ID>.p8`.
        public var keyID: String?
        public var teamID: String

        enum CodingKeys: String, CodingKey, CaseIterable {
            case keyFile = "key_file", keyEnv = "key_env", keyID = "key_id", teamID = "team_id"
        }

        public init(from decoder: Decoder) throws {
            try KnownKeys.check(decoder, CodingKeys.self)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            keyFile = try container.decodeIfPresent(String.self, forKey: .keyFile)
            keyEnv = try container.decodeIfPresent(String.self, forKey: .keyEnv)
            keyID = try container.decodeIfPresent(String.self, forKey: .keyID)
            teamID = try container.decode(String.self, forKey: .teamID)
        }

        /// The key id in the file name Apple gives a downloaded key, `AuthKey_ABCDE12345.p8`.
        public var keyIDFromFileName: String? {
            guard let keyFile else { return nil }
            let name = URL(fileURLWithPath: keyFile).lastPathComponent
            guard let match = name.wholeMatch(of: /AuthKey_([A-Z0-9]{10})\.p8/) else { return nil }
            return String(match.1)
        }

        /// `key_id`, else the id in the key file's name.
        public var effectiveKeyID: String? { keyID ?? keyIDFromFileName }

        /// Apple's key and team ids: 10 upper-case letters or digits.
        static func isAppleIdentifier(_ text: String) -> Bool {
            text.utf8.count == 10 && text.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) }
        }
    }

    public struct CertificateCredentials: Sendable, Decodable, Equatable {
        public var file: String
        /// p12 (default) or pem.
        public var format: String?
        public var keyFile: String?
        /// Name of the environment variable holding the password; the password itself never
        /// sits in the file.
        public var passwordEnv: String?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case file, format
            case keyFile = "key_file", passwordEnv = "password_env"
        }

        public init(from decoder: Decoder) throws {
            try KnownKeys.check(decoder, CodingKeys.self)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            file = try container.decode(String.self, forKey: .file)
            format = try container.decodeIfPresent(String.self, forKey: .format)
            keyFile = try container.decodeIfPresent(String.self, forKey: .keyFile)
            passwordEnv = try container.decodeIfPresent(String.self, forKey: .passwordEnv)
        }
    }

    /// The environment variable that overrides this app's URL: `PUSHWORKER_APNS_URL_<NAME>`.
    public var urlVariable: String {
        "PUSHWORKER_APNS_URL_" + String(name.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
    }

    /// Builds the client configuration, reading keys and passwords from files and the
    /// environment. Errors name the key at fault, as `apps[INDEX].…`.
    public func clientConfiguration(
        file: String, index: Int, environment variables: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> APNsClientConfiguration {
        let prefix = "apps[\(index)]"
        func fail(_ key: String, _ problem: String) -> ConfigurationError {
            ConfigurationError(file: file, key: "\(prefix).\(key)", problem)
        }
        let authentication: APNsClientConfiguration.Authentication
        switch (token, certificate) {
        case (.some(let token), nil):
            let pem: String
            if let variable = token.keyEnv {
                let value: String?
                do { value = try SecretEnvironment.value(of: variable, in: variables) } catch { throw fail("token.key_env", error.message) }
                guard let value, !value.isEmpty else {
                    throw fail("token.key_env", "environment variable \(variable) is not set (nor \(variable)_FILE)")
                }
                pem = value
            } else if let keyFile = token.keyFile {
                do { pem = try String(contentsOfFile: keyFile, encoding: .utf8) } catch {
                    throw fail("token.key_file", "cannot read '\(keyFile)': \(error.localizedDescription)")
                }
            } else {
                throw fail("token", "needs key_file or key_env")
            }
            let key: ES256Key
            do { key = try ES256Key.privateKey(pem: pem) } catch {
                throw fail(token.keyEnv != nil ? "token.key_env" : "token.key_file", error.description)
            }
            guard let keyID = token.effectiveKeyID else {
                throw fail("token.key_id", "is missing: give it, or keep the key file's name as Apple delivers it (AuthKey_<KEY_ID>.p8)")
            }
            guard TokenCredentials.isAppleIdentifier(keyID) else {
                throw fail("token.key_id", "'\(keyID)' is not 10 upper-case letters or digits, as Apple's key ids are (ABCDE12345)")
            }
            if let named = token.keyIDFromFileName, named != keyID {
                throw fail("token.key_id", "'\(keyID)' is not the id in the key file's name (AuthKey_\(named).p8): tokens signed with that key would name another, and APNs refuses them")
            }
            guard TokenCredentials.isAppleIdentifier(token.teamID) else {
                throw fail("token.team_id", "'\(token.teamID)' is not 10 upper-case letters or digits, as Apple's team ids are (DEF123GHIJ)")
            }
            authentication = .token(ProviderTokenSource(keyID: keyID, teamID: token.teamID, key: key))
        case (nil, .some(let certificate)):
            let format: APNsCertificateIdentity.Format
            switch certificate.format?.lowercased() ?? "p12" {
            case "p12": format = .p12
            case "pem": format = .pem
            case let other: throw fail("certificate.format", "'\(other)' is not p12 or pem")
            }
            guard FileManager.default.isReadableFile(atPath: certificate.file) else {
                throw fail("certificate.file", "cannot read '\(certificate.file)'")
            }
            var password: String?
            if let variable = certificate.passwordEnv {
                let value: String?
                do { value = try SecretEnvironment.value(of: variable, in: variables) } catch { throw fail("certificate.password_env", error.message) }
                guard let value else {
                    throw fail("certificate.password_env", "environment variable \(variable) is not set (nor \(variable)_FILE)")
                }
                password = value
            }
            authentication = .certificate(APNsCertificateIdentity(
                certificateFile: certificate.file, format: format, keyFile: certificate.keyFile, password: password))
        case (.some, .some):
            throw fail("", "give token or certificate credentials, not both")
        case (nil, nil):
            throw fail("", "needs token or certificate credentials")
        }

        var configuration: APNsClientConfiguration
        if let override = variables[urlVariable] ?? url {
            guard override.hasPrefix("https://") else { throw fail("url", "'\(override)' is not an https:// URL") }
            configuration = APNsClientConfiguration(baseURL: override, authentication: authentication)
        } else {
            let port = port ?? 443
            guard port == 443 || port == 2197 else { throw fail("port", "\(port) is not 443 or 2197, the ports APNs listens on") }
            configuration = APNsClientConfiguration(environment: environment, port: port, authentication: authentication)
        }
        if let managementURL {
            guard managementURL.hasPrefix("https://") else { throw fail("management_url", "'\(managementURL)' is not an https:// URL") }
            configuration.managementURL = managementURL.hasSuffix("/") ? String(managementURL.dropLast()) : managementURL
        }
        configuration.name = name
        configuration.caFile = caFile
        configuration.proxy = proxy
        configuration.transport = transport ?? .nghttp2
        if let proxy, !configuration.transport.supports(proxy: proxy) {
            let scheme = proxy.prefix { $0 != ":" }.lowercased()
            guard APNsTransport.curl.supports(proxy: proxy) else {
                throw fail("proxy", "'\(scheme)' is not an http://, https:// or socks5:// proxy URL")
            }
            throw fail("proxy", "a \(scheme):// proxy needs transport: curl (the nghttp2 transport tunnels through http:// proxies)")
        }
        if let pingIntervalSeconds {
            guard (0...3600).contains(pingIntervalSeconds) else {
                throw fail("ping_interval_seconds", "\(pingIntervalSeconds) is not between 0 (no PING) and 3600")
            }
            configuration.pingInterval = pingIntervalSeconds == 0 ? nil : .seconds(pingIntervalSeconds)
        }
        if let requestTimeoutMilliseconds {
            guard requestTimeoutMilliseconds > 0 else { throw fail("request_timeout_ms", "must be positive") }
            configuration.requestTimeout = .milliseconds(requestTimeoutMilliseconds)
        }
        if let connections {
            guard (1...64).contains(connections) else { throw fail("connections", "\(connections) is not between 1 and 64") }
            configuration.connections = connections
        }
        if let weight, !(1...100).contains(weight) {
            throw fail("weight", "\(weight) is not between 1 and 100")
        }
        return configuration
    }
}
