import Foundation

/// Everything needed to open and keep a connection: where, who, how long to wait, and the
/// topology to declare on every (re)connect.
public struct AMQPConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var vhost: String
    public var user: String
    public var password: String
    /// TLS settings; `nil` for plain `amqp://`.
    public var tls: AMQPTLSConfiguration?
    /// Heartbeat interval requested from the broker; zero disables heartbeats.
    public var heartbeat: Duration = .seconds(30)
    public var connectTimeout: Duration = .seconds(5)
    /// Time allowed for the AMQP handshake and login after TCP/TLS is up.
    public var handshakeTimeout: Duration = .seconds(10)
    /// Time allowed for a synchronous broker reply (declarations, qos, channel open).
    public var rpcTimeout: Duration = .seconds(10)
    public var reconnect = AMQPReconnectPolicy()
    /// Declared on the first connect and again after every reconnect.
    public var topology = AMQPTopology()
    /// Shown in the broker's management UI and `rabbitmqctl list_connections`.
    public var connectionName = "pushworker"
    /// Publishes sent but not yet confirmed, per connection. Bounds memory and keeps the socket
    /// from filling up with publishes while confirms wait to be read.
    public var maxUnconfirmedPublishes = 1024
    /// Whether the first connection waits for a broker that cannot be reached yet, retrying with
    /// `reconnect`'s backoff, instead of failing the start. For a worker started beside its broker
    /// (a container, a pod) that should come up when the broker does. Refused credentials, TLS
    /// failures and declarations the broker refuses still fail the start: waiting cannot fix them.
    public var waitsForBroker = false
    /// Told of every connection change, on the connection's I/O thread: must return at once.
    public var onConnectionEvent: (@Sendable (AMQPConnectionEvent) -> Void)?

    public init(host: String = "127.0.0.1", port: Int? = nil, vhost: String = "/", user: String = "guest", password: String = "guest", tls: AMQPTLSConfiguration? = nil) {
        self.host = host
        self.port = port ?? (tls == nil ? 5672 : 5671)
        self.vhost = vhost
        self.user = user
        self.password = password
        self.tls = tls
    }

    /// Parses an `amqp://` or `amqps://` URL in the RabbitMQ URI format:
    /// `amqp[s]://user:password@host:port/vhost?heartbeat=10&connection_timeout=5000&cacertfile=…&certfile=…&keyfile=…&verify=verify_peer|verify_none`.
    ///
    /// Errors name the offending part and never repeat the password.
    public init(url: String) throws {
        self = try AMQPURLParser.parse(url)
    }

    /// The URL with the password masked, for logs and error messages.
    public var redactedURL: String {
        let scheme = tls == nil ? "amqp" : "amqps"
        let vhostPart = vhost == "/" ? "" : (vhost.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? vhost)
        let hostPart = host.contains(":") ? "[\(host)]" : host
        return "\(scheme)://\(user):***@\(hostPart):\(port)/\(vhostPart)"
    }
}
