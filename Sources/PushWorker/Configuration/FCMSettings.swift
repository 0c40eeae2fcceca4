import APNsHTTP2
import FCM
import FCMHTTP2
import Foundation
import SecretEnvironment

/// An app's Android side (`apps[i].fcm`): its Firebase project's service account and how to
/// reach FCM. The key file is read and proved (its fields, its RSA key) when the configuration
/// is checked, so `config check` fails on a bad file without sending anything.
public struct FCMSettings: Sendable, Decodable, Equatable {
    /// Path of the service account key file (relative to the configuration file)…
    public var serviceAccount: String?
    /// …or the name of a variable holding its JSON (or `NAME_FILE`, a file holding it).
    public var serviceAccountEnv: String?
    /// FCM's base URL: Google's by default; a mock's or a gateway's.
    public var url: String?
    /// PEM roots to trust instead of the system's, for FCM and the token endpoint (a mock's).
    public var caFile: String?
    /// Connections to FCM (default 4: FCM serves about 100 streams a connection).
    public var connections: Int?
    public var transport: APNsTransport?
    /// Per-request timeout, milliseconds (default 15000).
    public var requestTimeoutMilliseconds: Int?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case url, connections, transport
        case serviceAccount = "service_account"
        case serviceAccountEnv = "service_account_env"
        case caFile = "ca_file"
        case requestTimeoutMilliseconds = "request_timeout_ms"
    }

    public init(from decoder: Decoder) throws {
        try KnownKeys.check(decoder, CodingKeys.self)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        serviceAccount = try container.decodeIfPresent(String.self, forKey: .serviceAccount)
        serviceAccountEnv = try container.decodeIfPresent(String.self, forKey: .serviceAccountEnv)
        url = try container.decodeIfPresent(String.self, forKey: .url)
        caFile = try container.decodeIfPresent(String.self, forKey: .caFile)
        connections = try container.decodeIfPresent(Int.self, forKey: .connections)
        if let connections, !(1...64).contains(connections) {
            throw DecodingError.dataCorruptedError(forKey: .connections, in: container, debugDescription: "\(connections) is not between 1 and 64")
        }
        transport = try container.decodeIfPresent(APNsTransport.self, forKey: .transport)
        requestTimeoutMilliseconds = try container.decodeIfPresent(Int.self, forKey: .requestTimeoutMilliseconds)
        if let timeout = requestTimeoutMilliseconds, !(100...600_000).contains(timeout) {
            throw DecodingError.dataCorruptedError(
                forKey: .requestTimeoutMilliseconds, in: container, debugDescription: "\(timeout) is not between 100 and 600000")
        }
    }

    /// The service account read and proved, and the client's configuration. Errors name the key,
    /// as `apps[INDEX].fcm.…`, and never quote the key.
    /// - Parameter proxy: the app's `proxy`, which FCM's requests take too.
    func plan(file: String, prefix: String, app: String, proxy: String? = nil, environment: [String: String]) throws(ConfigurationError) -> FCMPlan {
        func fail(_ key: String, _ problem: String) -> ConfigurationError { ConfigurationError(file: file, key: "\(prefix).fcm.\(key)", problem) }
        let account: FCMServiceAccount
        switch (serviceAccount, serviceAccountEnv) {
        case (.some(let path), nil):
            let resolved = PushWorkerConfiguration.path(path, besides: file)
            do { account = try FCMServiceAccount(path: resolved) } catch { throw fail("service_account", error.message) }
        case (nil, .some(let variable)):
            let value: String?
            do { value = try SecretEnvironment.value(of: variable, in: environment) } catch { throw fail("service_account_env", error.message) }
            guard let json = value, !json.isEmpty else { throw fail("service_account_env", "environment variable \(variable) is not set (nor \(variable)_FILE)") }
            do { account = try FCMServiceAccount(json: Data(json.utf8), source: "the service account in \(variable)") } catch {
                throw fail("service_account_env", error.message)
            }
        case (.some, .some):
            throw fail("service_account", "names both service_account and service_account_env; choose one")
        case (nil, nil):
            throw ConfigurationError(file: file, key: "\(prefix).fcm", "names no service account: service_account (a key file) or service_account_env")
        }
        var client = FCMClient.Configuration()
        client.name = app
        if let url {
            guard let parsed = URL(string: url), parsed.scheme == "https", parsed.host != nil else { throw fail("url", "\(url) is not an https URL") }
            // The HTTP/2 engine keeps a base URL's host and port only: a path would be dropped.
            guard parsed.path.isEmpty || parsed.path == "/", parsed.query == nil else {
                throw fail("url", "\(url) has a path; name the host (and port) only, as https://fcm.googleapis.com")
            }
            client.baseURL = url.hasSuffix("/") ? String(url.dropLast()) : url
        }
        if let caFile {
            let resolved = PushWorkerConfiguration.path(caFile, besides: file)
            guard FileManager.default.isReadableFile(atPath: resolved) else { throw fail("ca_file", "cannot read \(resolved)") }
            client.caFile = resolved
        }
        if let connections { client.connections = connections }
        if let transport { client.transport = transport }
        if let proxy {
            guard client.transport.supports(proxy: proxy) else {
                throw fail("transport", "the app's \(proxy.prefix { $0 != ":" }.lowercased()):// proxy needs transport: curl here too (the nghttp2 transport tunnels through http:// proxies)")
            }
            client.proxy = proxy
        }
        if let timeout = requestTimeoutMilliseconds { client.requestTimeout = .milliseconds(timeout) }
        return FCMPlan(account: account, client: client)
    }
}

/// An app's FCM side, checked: the service account and the client's configuration.
public struct FCMPlan: Sendable {
    public let account: FCMServiceAccount
    public let client: FCMClient.Configuration
}
