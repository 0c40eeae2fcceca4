import Foundation

/// A minimal HTTP CONNECT proxy on 127.0.0.1 for tests: answers one CONNECT per connection, then
/// relays bytes both ways. Records the targets it was asked for.
public final class ConnectProxy: @unchecked Sendable {
    public private(set) var port = 0
    private let listener: Int32
    private let targets = Locked<[String]>([])
    private let frozen = Locked(false)

    public var requestedTargets: [String] { targets.value }

    public init() throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        port = try TestPorts.bind(listener)
        guard listen(listener, 16) == 0 else { throw TestFailure("proxy listen failed") }
        let thread = Thread { [self] in self.acceptLoop() }
        thread.start()
    }

    /// From now on bytes are swallowed both ways and connections stay open: a peer that has
    /// vanished without closing anything, as behind a dead NAT.
    public func freeze(_ on: Bool = true) {
        frozen.withLock { $0 = on }
    }

    public func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            Thread { [self] in self.serve(client) }.start()
        }
    }

    private func serve(_ client: Int32) {
        var request = [UInt8]()
        var byte: UInt8 = 0
        while !request.suffix(4).elementsEqual([13, 10, 13, 10]), read(client, &byte, 1) == 1 { request.append(byte) }
        let line = String(decoding: request, as: UTF8.self).split(separator: "\r\n").first ?? ""
        let parts = line.split(separator: " ")
        guard parts.count >= 2, parts[0] == "CONNECT", let colon = parts[1].lastIndex(of: ":"),
            let targetPort = UInt16(parts[1][parts[1].index(after: colon)...])
        else {
            close(client)
            return
        }
        targets.withLock { $0.append(String(parts[1])) }
        let upstream = Self.connect(host: String(parts[1][..<colon]), port: targetPort)
        guard upstream >= 0 else {
            _ = "HTTP/1.1 502 Bad Gateway\r\n\r\n".withCString { write(client, $0, strlen($0)) }
            close(client)
            return
        }
        _ = "HTTP/1.1 200 Connection established\r\n\r\n".withCString { write(client, $0, strlen($0)) }
        let frozen = self.frozen
        Thread { Self.pump(from: upstream, to: client, dropping: { frozen.value }) }.start()
        Self.pump(from: client, to: upstream, dropping: { frozen.value })
    }

    /// A connected socket to host:port, or -1.
    static func connect(host: String, port: UInt16) -> Int32 {
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(upstream)
            return -1
        }
        return upstream
    }

    static func pump(from source: Int32, to destination: Int32, dropping: @Sendable () -> Bool = { false }) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(source, &buffer, buffer.count)
            if count <= 0 { break }
            if dropping() { continue }
            var offset = 0
            while offset < count {
                let written = buffer[offset..<count].withUnsafeBytes { write(destination, $0.baseAddress, $0.count) }
                if written <= 0 { break }
                offset += written
            }
        }
        shutdown(destination, Int32(SHUT_WR))
    }
}
