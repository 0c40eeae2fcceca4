import Foundation

/// One broker node to connect to, with its own credentials and TLS settings: the nodes of a
/// cluster may sit behind different names, certificates or even users.
public struct AMQPAddress: Sendable, Hashable {
    public var host: String
    public var port: Int
    public var vhost: String
    public var user: String
    public var password: String
    /// TLS settings; `nil` for plain `amqp://`.
    public var tls: AMQPTLSConfiguration?

    public init(host: String = "127.0.0.1", port: Int? = nil, vhost: String = "/", user: String = "guest", password: String = "guest", tls: AMQPTLSConfiguration? = nil) {
        self.host = host
        self.port = port ?? (tls == nil ? 5672 : 5671)
        self.vhost = vhost
        self.user = user
        self.password = password
        self.tls = tls
    }

    /// The URL with the password masked, for logs, `/readyz` and error messages.
    public var redactedURL: String {
        let scheme = tls == nil ? "amqp" : "amqps"
        let vhostPart = vhost == "/" ? "" : (vhost.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? vhost)
        return "\(scheme)://\(user):***@\(node)/\(vhostPart)"
    }

    /// `host:port`, the short name of a node in logs and metrics.
    public var node: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
