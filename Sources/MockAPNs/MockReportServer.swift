import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A small plain-HTTP endpoint for tests in other processes: `GET /notifications` lists what was
/// accepted, `GET /broadcasts` the accepted broadcasts, `GET /counts` gives deliveries per token,
/// broadcasts per channel id and the request and connection totals, `DELETE /notifications`
/// clears the record (broadcasts too).
enum MockReportServer {
    static func bind(group: EventLoopGroup, host: String, port: Int, state: MockAPNsState) async throws -> Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ReportHandler(state: state))
                }
            }
            .bind(host: host, port: port).get()
    }

    final class ReportHandler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let state: MockAPNsState
        var head: HTTPRequestHead?

        init(state: MockAPNsState) { self.state = state }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): self.head = head
            case .body: break
            case .end:
                guard let head else { return }
                let (status, object) = answer(head)
                let json = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
                var headers = HTTPHeaders([("content-type", "application/json"), ("content-length", "\(json.count)")])
                if !head.isKeepAlive { headers.add(name: "connection", value: "close") }
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: json)))), promise: nil)
                let keepAlive = head.isKeepAlive
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                    if !keepAlive { channel.close(promise: nil) }
                }
            }
        }

        private func answer(_ head: HTTPRequestHead) -> (HTTPResponseStatus, Any) {
            switch (head.method, head.uri) {
            case (.GET, "/notifications"):
                return (.ok, state.recorded.map { notification -> [String: Any] in
                    [
                        "token": notification.token, "apns_id": notification.apnsID, "headers": notification.headers.filter { $0.key != "authorization" },
                        "payload": String(decoding: notification.payload, as: UTF8.self), "connection": notification.connection,
                    ]
                })
            case (.GET, "/broadcasts"):
                return (.ok, state.broadcasts.map { broadcast -> [String: Any] in
                    [
                        "bundle_id": broadcast.bundleID, "channel_id": broadcast.channelID, "request_id": broadcast.requestID,
                        "headers": broadcast.headers.filter { $0.key != "authorization" },
                        "payload": String(decoding: broadcast.payload, as: UTF8.self), "connection": broadcast.connection,
                    ]
                })
            case (.GET, "/counts"):
                let counts = state.recorded.reduce(into: [String: Int]()) { $0[$1.token, default: 0] += 1 }
                let broadcasts = state.broadcasts.reduce(into: [String: Int]()) { $0[$1.channelID, default: 0] += 1 }
                return (.ok, ["deliveries": counts, "broadcasts": broadcasts, "requests": state.requests, "connections": state.connections])
            case (.DELETE, "/notifications"):
                state.clearRecorded()
                return (.ok, ["cleared": true])
            default:
                return (.notFound, ["error": "unknown endpoint \(head.method.rawValue) \(head.uri)"])
            }
        }
    }
}
