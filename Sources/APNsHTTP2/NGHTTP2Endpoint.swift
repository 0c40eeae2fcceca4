import APNs
import CNGHTTP2
import Foundation

/// Where an nghttp2 connection goes, parsed from the client configuration: the TLS peer (host,
/// port, :authority) and the optional HTTP CONNECT proxy with its credentials.
struct NGHTTP2Endpoint {
    let configuration: APNsClientConfiguration
    var host: String
    var port: Int
    var authority: String
    var proxyHost: String?
    var proxyPort = 0
    /// `Basic …` from the proxy URL's user information; never part of a message.
    var proxyAuthorization: String?

    init(configuration: APNsClientConfiguration) throws(APNsClientError) {
        self.configuration = configuration
        let base = configuration.baseURL
        guard base.lowercased().hasPrefix("https://") else { throw .transport("\(base) is not an https:// URL") }
        authority = String(base.dropFirst(8).prefix { $0 != "/" })
        (host, port) = try Self.split(authority, defaultPort: 443, what: base)
        if let proxy = configuration.proxy {
            guard APNsTransport.nghttp2.supports(proxy: proxy) else {
                throw .transport("the nghttp2 transport tunnels through http:// proxies only; use transport curl for this proxy")
            }
            var hostPort = String(proxy.dropFirst(7).prefix { $0 != "/" })
            if let at = hostPort.lastIndex(of: "@") {
                let user = String(hostPort[..<at]).removingPercentEncoding ?? String(hostPort[..<at])
                proxyAuthorization = "Basic " + Data(user.utf8).base64EncodedString()
                hostPort = String(hostPort[hostPort.index(after: at)...])
            }
            let (proxyHost, proxyPort) = try Self.split(hostPort, defaultPort: 1080, what: "the proxy URL")
            self.proxyHost = proxyHost
            self.proxyPort = proxyPort
        }
    }

    /// `host`, `host:port`, `[v6]` or `[v6]:port`.
    private static func split(_ text: String, defaultPort: Int, what: String) throws(APNsClientError) -> (String, Int) {
        var host = Substring(text)
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .transport("\(what): unclosed [ in the host") }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if rest.hasPrefix(":") { portText = rest.dropFirst() } else if !rest.isEmpty { throw .transport("\(what): bad host") }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw .transport("\(what): no host") }
        guard let portText else { return (String(host), defaultPort) }
        guard let port = Int(portText), (1...65535).contains(port) else { throw .transport("\(what): bad port '\(portText)'") }
        return (String(host), port)
    }

    /// Starts the engine's thread; nil (after `onError`) when it cannot start.
    func start(onError: (String) -> Void) -> OpaquePointer? {
        // The engine copies every string before pw_h2_start returns.
        var owned: [UnsafeMutablePointer<CChar>] = []
        defer { owned.forEach { free($0) } }
        func text(_ value: String?) -> UnsafePointer<CChar>? {
            guard let value, let copy = strdup(value) else { return nil }
            owned.append(copy)
            return UnsafePointer(copy)
        }
        func milliseconds(_ duration: Duration) -> Int32 {
            Int32(min(duration / .milliseconds(1), Double(Int32.max)))
        }
        var config = pw_h2_config()
        config.host = text(host)
        config.port = Int32(port)
        config.authority = text(authority)
        config.proxy_host = text(proxyHost)
        config.proxy_port = Int32(proxyPort)
        config.proxy_authorization = text(proxyAuthorization)
        config.ca_file = text(configuration.caFile)
        if case .certificate(let identity) = configuration.authentication {
            config.certificate_file = text(identity.certificateFile)
            config.certificate_is_p12 = identity.format == .p12 ? 1 : 0
            config.key_file = text(identity.keyFile)
            config.password = text(identity.password)
        }
        config.connect_timeout_ms = milliseconds(configuration.connectTimeout)
        config.request_timeout_ms = milliseconds(configuration.requestTimeout)
        config.ping_interval_ms = configuration.pingInterval.map(milliseconds) ?? 0
        config.ping_timeout_ms = milliseconds(configuration.pingTimeout)
        config.max_concurrent_streams = UInt32(clamping: configuration.maxConcurrentStreams)
        config.completion = nghttp2Completion
        var error = [CChar](repeating: 0, count: 512)
        let handle = pw_h2_start(&config, &error, error.count)
        if handle == nil { onError(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)) }
        return handle
    }
}
