import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle

/// The operator's HTTP endpoint: `GET /metrics` (Prometheus text), `/healthz` (the process
/// serves) and `/readyz` (what `readiness` reports; 503 until every check passes).
///
/// One event-loop thread: a scrape every few seconds and a probe every few more are all it
/// serves, and it must not take a core from the workers.
///
/// A `Service` whose serving begins at `start`, not at `run`: the probes must answer while the
/// worker waits for its broker, before its service group exists.
public final class OperatorEndpoint: Service, Sendable {
    public typealias Readiness = @Sendable () async -> ReadinessReport
    /// A page the worker adds (`/deliveries`): answered off the event loop, from the request's
    /// query and `authorization` header.
    public typealias Page = @Sendable (PageRequest) async -> PageResponse

    public struct PageRequest: Sendable {
        /// The path below the page's own (`""`, or `/search`).
        public var subpath: String
        public var query: [String: String]
        public var authorization: String?
    }

    public struct PageResponse: Sendable {
        public var status: HTTPResponseStatus
        public var contentType: String
        public var body: [UInt8]
        public var headers: [(String, String)]

        /// - Parameter statusCode: 200, 401, …
        public init(statusCode: Int, contentType: String, body: [UInt8], headers: [(String, String)] = []) {
            self.init(status: HTTPResponseStatus(statusCode: statusCode), contentType: contentType, body: body, headers: headers)
        }

        init(status: HTTPResponseStatus, contentType: String, body: [UInt8], headers: [(String, String)] = []) {
            self.status = status
            self.contentType = contentType
            self.body = body
            self.headers = headers
        }
    }

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    /// The port bound (useful with port 0).
    public let port: Int

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel) {
        self.group = group
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
    }

    /// Binds `host:port` and serves until `run` ends or `shutdown()`. Throws when the address
    /// cannot be bound (in use, not local): the worker then fails to start rather than run
    /// unobserved.
    /// - Parameters:
    ///   - beforeScrape: refreshes gauges that are read rather than kept (requests in flight,
    ///     open connections), so the hot path pays nothing for them.
    public static func start(
        host: String, port: Int, registry: PrometheusCollectorRegistry,
        beforeScrape: @escaping @Sendable () -> Void = {}, readiness: @escaping Readiness, pages: [String: Page] = [:]
    ) async throws -> OperatorEndpoint {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let routes = Routes(registry: registry, beforeScrape: beforeScrape, readiness: readiness, pages: pages)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(RequestHandler(routes: routes))
                    }
                }
                .bind(host: host, port: port).get()
            return OperatorEndpoint(group: group, channel: channel)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Holds the endpoint open until its service group stops it. Placed before the worker in the
    /// group, it is stopped after it: `/metrics` and the probes still answer while the worker drains.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    /// For a start that fails before the service group runs.
    public func shutdown() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// What each path answers.
struct Routes: Sendable {
    let registry: PrometheusCollectorRegistry
    let beforeScrape: @Sendable () -> Void
    let readiness: OperatorEndpoint.Readiness
    /// By path prefix (`/deliveries` answers `/deliveries` and `/deliveries/…`).
    let pages: [String: OperatorEndpoint.Page]

    typealias Response = OperatorEndpoint.PageResponse

    /// The page a path belongs to, and the rest of the path.
    func page(for path: String) -> (OperatorEndpoint.Page, subpath: String)? {
        for (prefix, page) in pages where path == prefix || path.hasPrefix(prefix + "/") {
            return (page, String(path.dropFirst(prefix.count)))
        }
        return nil
    }

    /// nil: answered later, by `readiness` or a page.
    func answer(method: HTTPMethod, path: String) -> Response? {
        guard method == .GET || method == .HEAD else {
            return Response(status: .methodNotAllowed, contentType: "text/plain", body: Array("GET only\n".utf8))
        }
        switch path {
        case "/metrics":
            beforeScrape()
            var body: [UInt8] = []
            registry.emit(into: &body)
            return Response(status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: body)
        case "/healthz":
            return Response(status: .ok, contentType: "text/plain", body: Array("ok\n".utf8))
        case "/readyz":
            return nil
        case _ where page(for: path) != nil:
            return nil
        default:
            return Response(status: .notFound, contentType: "text/plain", body: Array("not found: /metrics, /healthz, /readyz\n".utf8))
        }
    }

    func ready() async -> Response {
        let report = await readiness()
        return Response(status: report.isReady ? .ok : .serviceUnavailable, contentType: "application/json", body: Array(report.json.utf8))
    }
}

final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let routes: Routes
    private var request: HTTPRequestHead?

    init(routes: Routes) {
        self.routes = routes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            request = head
        case .body:
            break
        case .end:
            guard let head = request else { return }
            request = nil
            let path = String(head.uri.prefix { $0 != "?" })
            if let response = routes.answer(method: head.method, path: path) {
                respond(context: context, head: head, response)
                return
            }
            let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            let routes = routes
            let request = OperatorEndpoint.PageRequest(
                subpath: "", query: Self.query(of: head.uri), authorization: head.headers.first(name: "authorization"))
            context.eventLoop.makeFutureWithTask { () async -> Routes.Response in
                guard let (page, subpath) = routes.page(for: path) else { return await routes.ready() }
                var request = request
                request.subpath = subpath
                return await page(request)
            }.whenSuccess { response in
                bound.value.handler.respond(context: bound.value.context, head: head, response)
            }
        }
    }

    /// `?a=1&b=x%20y` as a map (the last of a repeated name wins).
    static func query(of uri: String) -> [String: String] {
        guard let mark = uri.firstIndex(of: "?") else { return [:] }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0) }
            guard let name = parts.first, !name.isEmpty else { continue }
            query[name] = parts.count > 1 ? parts[1] : ""
        }
        return query
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead, _ response: Routes.Response) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        headers.add(name: "content-length", value: "\(response.body.count)")
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: response.status, headers: headers))), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in bound.value.close(promise: nil) }
        }
    }
}
