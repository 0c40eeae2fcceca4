import Foundation

/// Relays TCP connections from a port of 127.0.0.1 to another address, so a test can make a
/// service appear (start the relay) where nothing listened before, without restarting the real
/// one other tests share.
public final class TCPRelay: @unchecked Sendable {
    private let listener: Int32
    /// Both sockets of every relayed connection, for `cut()`.
    private let relayed = Locked<[Int32]>([])

    /// Listens on the port `closed` held (a node that was down comes up there; no other test
    /// can have taken the port meanwhile) and relays to `targetHost:targetPort`.
    public init(opening closed: ClosedPort, targetHost: String = "127.0.0.1", targetPort: Int) throws {
        guard let listener = closed.take() else { throw TestFailure("the closed port \(closed.port) was released already") }
        self.listener = listener
        guard listen(listener, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(listener)
            throw TestFailure("relay cannot listen on 127.0.0.1:\(closed.port): \(reason)")
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
