/// The HTTP/2 engine under an ``APNsClient``.
public enum APNsTransport: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// libnghttp2 over OpenSSL, one epoll thread per connection: the fast default, with PING
    /// keepalive and ALPN h2 only. Proxies: `http://` CONNECT tunnels.
    case nghttp2
    /// libcurl's multi interface: several times the CPU per request, kept for the proxies
    /// libcurl supports beyond an HTTP CONNECT tunnel (https://, SOCKS).
    case curl

    public var description: String { rawValue }
}
