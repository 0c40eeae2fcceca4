/// The HTTP/2 engine under an ``APNsClient``.
public enum APNsTransport: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// libnghttp2 over OpenSSL, one epoll thread per connection: the fast default, with PING
    /// keepalive and ALPN h2 only. Proxies: `http://` CONNECT tunnels.
    case nghttp2
    /// libcurl's multi interface: several times the CPU per request, kept for the proxies
    /// libcurl supports beyond an HTTP CONNECT tunnel (https://, SOCKS).
    case curl

    public var description: String { rawValue }

    /// Whether this transport can reach APNs through `proxy`, by its scheme: nghttp2 opens
    /// CONNECT tunnels through `http://` proxies; libcurl also speaks `https://` and SOCKS.
    public func supports(proxy: String) -> Bool {
        guard let separator = proxy.range(of: "://") else { return false }
        let scheme = proxy[..<separator.lowerBound].lowercased()
        switch self {
        case .nghttp2: return scheme == "http"
        case .curl: return ["http", "https", "socks4", "socks4a", "socks5", "socks5h"].contains(scheme)
        }
    }
}
