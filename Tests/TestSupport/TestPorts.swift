import Foundation

/// Ports for the tests' listeners, below Linux's ephemeral range (32768–60999): a listener there
/// can find its port taken by an outgoing connection, and a server restarted on it then fails
/// with EADDRINUSE. Candidates are random in 12000–19999 (RabbitMQ's 15671/15672 left out),
/// tried until one is free.
public enum TestPorts {
    static let range = 12_000..<20_000
    static let attempts = 50

    /// A port of the range, not one RabbitMQ's plugins use.
    public static func candidate() -> Int {
        while true {
            let port = Int.random(in: range)
            if port != 15671 && port != 15672 { return port }
        }
    }

    /// Binds `descriptor` (an IPv4 TCP socket) to 127.0.0.1 on a free port of the range;
    /// `reuseAddress` as a listener sets it, so that a port left in TIME_WAIT is usable.
    public static func bind(_ descriptor: Int32, reuseAddress: Bool = true) throws -> Int {
        if reuseAddress {
            var reuse: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        }
        for _ in 0..<attempts {
            let port = candidate()
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if bound == 0 { return port }
            guard errno == EADDRINUSE else { throw TestFailure("bind to 127.0.0.1:\(port) failed: \(String(cString: strerror(errno)))") }
        }
        throw TestFailure("no free port in \(range) after \(attempts) tries")
    }

    /// A port of the range that was free a moment ago, for a program that binds it itself. Until
    /// it does, any other test may take it: a program that can bind port 0 and say which port it
    /// got is better started that way.
    public static func free() throws -> Int {
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard probe >= 0 else { throw TestFailure("socket failed") }
        defer { close(probe) }
        return try bind(probe)
    }

    /// Starts a server on candidate ports until one is not in use.
    public static func start<T>(_ server: (Int) async throws -> T) async throws -> T {
        for attempt in 1... {
            do {
                return try await server(candidate())
            } catch where "\(error)".contains("Address already in use") && attempt < attempts {
                continue
            }
        }
        fatalError("unreachable")
    }
}

/// A port where nothing listens and nothing else can while this lives, for "a node that is
/// down": a socket bound but not listening, so connections to it are refused. Without
/// SO_REUSEADDR, no other socket can bind the port. A port merely free a moment ago could be
/// taken by another test's server, and the test would talk to that instead.
public final class ClosedPort: Sendable {
    public let port: Int
    private let descriptor: Locked<Int32?>

    public init() throws {
        // Close-on-exec: a child started meanwhile (Foundation's Process) must not hold it.
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw TestFailure("socket failed") }
        do {
            port = try TestPorts.bind(socket, reuseAddress: false)
        } catch {
            close(socket)
            throw error
        }
        descriptor = Locked(socket)
    }

    /// Frees the port.
    public func release() {
        if let open = take() { close(open) }
    }

    /// The bound socket, now the caller's to listen on and close (`TCPRelay(opening:)`).
    func take() -> Int32? {
        descriptor.withLock { descriptor in
            defer { descriptor = nil }
            return descriptor
        }
    }

    deinit { release() }
}
