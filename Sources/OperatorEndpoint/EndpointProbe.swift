import NIOCore
import NIOHTTP1
import NIOPosix

/// A GET to the operator endpoint, for `pushworker health`: the image's HEALTHCHECK must ask the
/// worker without curl or a shell in the image, and with a deadline (a worker whose event loop
/// hangs must count as unhealthy, not hang the check).
public enum EndpointProbe {
    public struct Answer: Sendable {
        public var status: Int
        public var body: String
    }

    public enum Failure: Error, CustomStringConvertible {
        case noAnswer(String)
        case timedOut(seconds: Double)

        public var description: String {
            switch self {
            case .noAnswer(let reason): reason
            case .timedOut(let seconds): "no answer within \(seconds) s"
            }
        }
    }

    /// `GET path` on `host:port`, over one connection closed afterwards.
    public static func get(host: String, port: Int, path: String, timeoutSeconds: Double) async throws -> Answer {
        let deadline = TimeAmount.nanoseconds(Int64(timeoutSeconds * 1_000_000_000))
        return try await withThrowingTaskGroup(of: Answer?.self) { group in
            group.addTask { try await request(host: host, port: port, path: path, connectTimeout: deadline) }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(deadline.nanoseconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let answer = first else {
                throw Failure.timedOut(seconds: timeoutSeconds)
            }
            return answer
        }
    }

    private static func request(host: String, port: Int, path: String, connectTimeout: TimeAmount) async throws -> Answer {
        let client: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
        do {
            client = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(connectTimeout)
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw Failure.noAnswer("cannot connect to \(host):\(port): \(error)")
        }
        return try await client.executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path)
            head.headers.add(name: "host", value: host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")
            head.headers.add(name: "connection", value: "close")
            // In one write: a GET's head is the whole request to the server, which may answer
            // and close (connection: close) before a separate `.end` reaches the channel, and
            // that `.end` would then fail the probe with "I/O on closed channel".
            try await outbound.write(contentsOf: [.head(head), .end(nil)])
            var status = 0
            var body = ByteBuffer()
            for try await part in inbound {
                switch part {
                case .head(let response): status = Int(response.status.code)
                case .body(var chunk): body.writeBuffer(&chunk)
                case .end: return Answer(status: status, body: String(buffer: body))
                }
            }
            throw Failure.noAnswer("\(host):\(port) closed the connection before answering")
        }
    }
}
