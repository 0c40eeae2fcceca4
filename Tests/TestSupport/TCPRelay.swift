import Foundation

/// Relays TCP connections from a port of 127.0.0.1 to another address, so a test can make a
/// service appear (start the relay) where nothing listened before, without restarting the real
/// one other tests share.
public final class TCPRelay: @unchecked Sendable {
    private let listener: Int32
    /// Both sockets of every relayed connection, for `cut()`.
    private let relayed = Locked<[Int32]>([])

    /// Listens on `port` (chosen beforehand, e.g. with `TestPorts.free()`) and relays to
    /// `targetHost:targetPort`.
    public init(port: Int, targetHost: String = "127.0.0.1", targetPort: Int) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var reuse: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(listener)
            throw TestFailure("relay cannot listen on 127.0.0.1:\(port): \(reason)")
        }
        Thread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                let upstream = ConnectProxy.connect(host: targetHost, port: UInt16(targetPort))
                guard upstream >= 0 else {
                    close(client)
                    continue
                }
                self.relayed.withLock { $0 += [client, upstream] }
                Thread { ConnectProxy.pump(from: upstream, to: client) }.start()
                Thread { ConnectProxy.pump(from: client, to: upstream) }.start()
            }
        }.start()
    }

    /// Stops accepting; relayed connections go on until either side closes.
    public func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// Stops accepting and breaks every relayed connection, as a node that dies would.
    public func cut() {
        stop()
        for socket in relayed.withLock({ $0 }) { shutdown(socket, Int32(SHUT_RDWR)) }
    }
}
