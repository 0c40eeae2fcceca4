import Foundation

/// Everything needed to open and keep a connection: where, who, how long to wait, and the
/// topology to declare on every (re)connect.
public struct AMQPConfiguration: Sendable {
    /// The broker nodes, tried in this order: a connection goes to the first that answers, and
    /// when it is lost, to the next. Never empty. One address is the single-node form; a cluster
    /// lists every node (see `init(urls:shuffled:)` for spreading a fleet over them).
    public var addresses: [AMQPAddress]
    /// The first address: the whole of the one-address form, and the node tried first.
    public var address: AMQPAddress {
        get { addresses[0] }
        set { addresses[0] = newValue }
    }
    /// Heartbeat interval requested from the broker; zero disables heartbeats.
    public var heartbeat: Duration = .seconds(30)
    public var connectTimeout: Duration = .seconds(5)
    /// Time allowed for the AMQP handshake and login after TCP/TLS is up.
    public var handshakeTimeout: Duration = .seconds(10)
    /// Time allowed for a synchronous broker reply (declarations, qos, channel open).
    public var rpcTimeout: Duration = .seconds(10)
    /// How long a closing consumer waits, in all, for the broker to answer the cancel of its
    /// consumers, by when a quorum queue has taken the acks sent before (see `AMQPConsumer.close`).
    public var cancelTimeout: Duration = .seconds(5)
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
    /// (a container, a pod) that should come up when the broker does. A new quorum queue the broker
    /// cannot form yet (``AMQPError/isClusterNotFormed``) is waited for the same way, and a queue
    /// the broker removed just after declaring it (``AMQPError/declaredQueueRemoved``) is declared
    /// again. Refused credentials, TLS failures and other declarations the broker refuses still
    /// fail the start: waiting cannot fix them.
    public var waitsForBroker = false
    /// Told of every connection change, on the connection's I/O thread: must return at once.
    public var onConnectionEvent: (@Sendable (AMQPConnectionEvent) -> Void)?

    public init(host: String = "127.0.0.1", port: Int? = nil, vhost: String = "/", user: String = "guest", password: String = "guest", tls: AMQPTLSConfiguration? = nil) {
        addresses = [AMQPAddress(host: host, port: port, vhost: vhost, user: user, password: password, tls: tls)]
    }

    /// Parses an `amqp://` or `amqps://` URL in the RabbitMQ URI format:
    /// `amqp[s]://user:password@host:port/vhost?heartbeat=10&connection_timeout=5000&cacertfile=…&certfile=…&keyfile=…&verify=verify_peer|verify_none`.
    ///
    /// Errors name the offending part and never repeat the password.
    public init(url: String) throws {
        self = try AMQPURLParser.parse(url)
    }

    /// The nodes of a cluster, one URL each (credentials and TLS per URL). `heartbeat` and
    /// `connection_timeout` are connection-wide: the first URL's count. `shuffled` puts them in a
    /// random order, once: every connection of this process then starts on the same node, and a
    /// fleet of processes spreads over the nodes instead of all crowding the first.
    public init(urls: [String], shuffled: Bool = false) throws {
        guard !urls.isEmpty else { throw AMQPError(.invalidConfiguration, "no AMQP URL given: name at least one broker node") }
        var parsed = try urls.enumerated().map { index, url in
            do { return try AMQPURLParser.parse(url) } catch let error as AMQPError where urls.count > 1 {
                throw AMQPError(error.kind, "URL \(index + 1) of \(urls.count): \(error.message)")
            }
        }
        var configuration = parsed.removeFirst()
        configuration.addresses += parsed.flatMap(\.addresses)
        if shuffled { configuration.addresses.shuffle() }
        self = configuration
    }

    /// The URLs of a comma-separated list (an environment variable's form), blanks around them
    /// ignored; a comma inside a password is written %2C.
    public static func urls(inList list: String) -> [String] {
        list.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
    }

    /// The first address's URL with the password masked; `redactedURLs` names them all.
    public var redactedURL: String { addresses[0].redactedURL }

    /// Every address, passwords masked, comma-separated in the order they are tried.
    public var redactedURLs: String { addresses.map(\.redactedURL).joined(separator: ",") }
}
