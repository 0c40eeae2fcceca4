import Foundation

/// A TCP listener on 127.0.0.1 that never accepts: the kernel completes the handshake, then
/// nothing is ever said, like a hung broker.
public final class SilentListener {
    public private(set) var port = 0
    private let descriptor: Int32

    public init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.descriptor = descriptor
        guard descriptor >= 0 else { throw TestFailure("socket failed") }
        port = try TestPorts.bind(descriptor)
        guard listen(descriptor, 8) == 0 else { throw TestFailure("listen failed") }
    }

    deinit {
        close(descriptor)
    }
}
