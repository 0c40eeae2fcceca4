import APNs
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// Answers one HTTP/2 stream, i.e. one notification (or broadcast, or channel management call),
/// the way APNs would.
final class MockStreamHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let connection: MockConnection
    private let server: MockAPNsServer.Shared
    /// On the management listener: only `/1/apps/…` is served.
    private let managementOnly: Bool
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(connection: MockConnection, server: MockAPNsServer.Shared, managementOnly: Bool = false) {
        self.connection = connection
        self.server = server
        self.managementOnly = managementOnly
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            // Frozen once a GOAWAY named it: streams opened later are refused, not promised.
            if connection.goAwayLastStream == nil, let id = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID) {
                connection.highestStream = max(connection.highestStream, Int(id))
            }
        case .body(var buffer):
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            respond(context: context)
        }
    }

    private func respond(context: ChannelHandlerContext) {
        guard let head, let parent = context.channel.parent else { return }
        if let last = connection.goAwayLastStream, let id = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID),
            Int(id) > last
        {
            // Opened after our GOAWAY: never processed, as the GOAWAY promised. The client retries it.
            context.close(promise: nil)
            return
        }
        connection.received += 1
        connection.inFlight += 1
        server.state.requestArrived()
        // An FCM message's device is in its body: faults filtered by token apply to it as to an APNs device.
        let token = MockRequestValidator.token(in: head.uri) ?? (server.fcm == nil ? nil : MockFCMService.token(ofSend: head.uri, body: body)) ?? ""
        var route = MockChannelService.Route(path: head.uri)
        switch route {
        case .management: if !managementOnly && !server.managementOnMainListener { route = .unknownManagement }
        case .device, .broadcast: if managementOnly { route = .unknownManagement }
        case .unknownManagement: break
        }
        let channel = head.headers.first(name: "apns-channel-id")

        let received = connection.received
        let dropping = server.state.firingFaults(token: token, channel: channel, where: {
            switch $0 {
            case .resetConnection(let after), .goAwayAbrupt(let after): received == after + 1
            default: false
            }
        })
        if let fault = dropping.first {
            server.state.requestFinished()
            if case .goAwayAbrupt = fault {
                // Delivered, and the answer never leaves: the client cannot tell it from a
                // request that never arrived. An FCM message is recorded as FCM's.
                if server.fcm != nil, case .send(let project)? = MockFCMService.Route(path: head.uri) {
                    server.state.record(RecordedFCMMessage(
                        project: project, token: token, name: "projects/\(project)/messages/\(server.state.nextFCMMessageNumber())",
                        message: body, connection: connection.number))
                } else {
                    server.state.record(RecordedNotification(
                        token: token, apnsID: UUID().uuidString.lowercased(), headers: [:], payload: body,
                        connection: connection.number, concurrentStreams: connection.inFlight))
                }
                sendGoAway(parent)
            }
            reset(parent)
            return
        }

        if connection.certificateAuthenticated == nil {
            let tls = try? parent.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)
            connection.certificateAuthenticated = tls?.peerCertificate != nil
        }
        var headers: [String: [String]] = [:]
        for (name, value) in head.headers { headers[name.lowercased(), default: []].append(value) }
        if let fcm = server.fcm, let fcmRoute = MockFCMService.Route(path: head.uri) {
            respondAsFCM(fcm, fcmRoute, sentTo: token, headers: headers, context: context, parent: parent)
            return
        }
        if route != .device {
            respondToChannelRequest(route, headers: headers, channel: channel, context: context, parent: parent)
            return
        }
        var (decision, verified) = server.validator.decide(MockRequestValidator.Request(
            method: head.method.rawValue, path: head.uri, headers: headers, body: body,
            certificateAuthenticated: connection.certificateAuthenticated ?? false, verifiedToken: connection.verifiedToken))
        remember(verified)

        var delay = Duration.zero
        for action in server.state.firingFaults(token: token, where: { if case .latency = $0 { true } else { false } }) {
            if case .latency(let extra) = action { delay += extra }
        }
        if case .accept = decision {
            if case .reject(let reason)? = server.state.firingFaults(token: token, where: { if case .reject = $0 { true } else { false } }).first {
                decision = .reject(reason)
            } else if let since = server.state.unregisteredSince(token) {
                decision = .reject(.unregistered, timestamp: since)
            }
        }

        let apnsID: String
        if case .accept(let id) = decision { apnsID = id } else { apnsID = headers["apns-id"]?.first?.lowercased() ?? UUID().uuidString.lowercased() }
        let notification = RecordedNotification(
            token: token, apnsID: apnsID, headers: headers.compactMapValues(\.first),
            payload: body, connection: connection.number, concurrentStreams: connection.inFlight)
        let gate = server.state.firingFaults(token: token, where: { if case .held = $0 { true } else { false } })
            .lazy.compactMap { if case .held(let gate) = $0 { gate } else { nil } }.first
        let send = { [self] in self.send(decision, apnsID: apnsID, notification: notification, context: context, parent: parent) }
        let answer = {
            if delay == .zero {
                send()
            } else {
                let nanoseconds = Int64(delay / .nanoseconds(1))
                context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(nanoseconds)) { send() }
            }
        }
        if let gate {
            let held = NIOLoopBound(answer, eventLoop: context.eventLoop)
            gate.whenOpen { held.eventLoop.execute { held.value() } }
        } else {
            answer()
        }
    }

    private func send(_ decision: MockRequestValidator.Decision, apnsID: String, notification: RecordedNotification, context: ChannelHandlerContext, parent: Channel) {
        var headers = HTTPHeaders([("apns-id", apnsID)])
        let status: Int
        var bodyBuffer: ByteBuffer?
        switch decision {
        case .accept:
            status = 200
            if server.configuration.sandbox { headers.add(name: "apns-unique-id", value: UUID().uuidString.lowercased()) }
            server.state.record(notification)
        case .reject(let reason, let timestamp):
            status = reason.status
            bodyBuffer = Self.errorBody(reason, timestamp: timestamp, headers: &headers, context: context)
        }
        write(status: status, headers: headers, body: bodyBuffer, accepted: status == 200, faultToken: notification.token, faultChannel: nil,
            context: context, parent: parent)
    }

    private static func errorBody(_ reason: APNsErrorReason, timestamp: Date?, headers: inout HTTPHeaders, context: ChannelHandlerContext) -> ByteBuffer {
        var object: [String: Any] = ["reason": reason.rawValue]
        if let timestamp { object["timestamp"] = Int64(timestamp.timeIntervalSince1970 * 1000) }
        let json = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        headers.add(name: "content-type", value: "application/json")
        return context.channel.allocator.buffer(bytes: json)
    }

    /// Keeps the token the connection has verified, and tells the server of one it has not seen.
    private func remember(_ verified: (jwt: String, issuedAt: Date)?) {
        if let verified, verified.jwt != connection.verifiedToken?.jwt { server.state.providerTokenVerified(verified.jwt) }
        connection.verifiedToken = verified
    }

    /// A broadcast or a channel management call: the same credentials, faults and bookkeeping
    /// as a push, APNs' other rules (``MockChannelService``), and `apns-request-id` in every answer.
    private func respondToChannelRequest(
        _ route: MockChannelService.Route, headers: [String: [String]], channel: String?, context: ChannelHandlerContext, parent: Channel
    ) {
        var verified = connection.verifiedToken
        let request = MockRequestValidator.Request(
            method: head?.method.rawValue ?? "", path: head?.uri ?? "", headers: headers, body: body,
            certificateAuthenticated: connection.certificateAuthenticated ?? false, verifiedToken: verified)
        let state = server.state
        let answer = server.channels.decide(route, request, verified: &verified) {
            if case .reject(let reason)? = state.firingFaults(token: "", channel: channel, where: { if case .reject = $0 { true } else { false } }).first {
                return reason
            }
            return nil
        }
        remember(verified)
        var delay = Duration.zero
        for action in state.firingFaults(token: "", channel: channel, where: { if case .latency = $0 { true } else { false } }) {
            if case .latency(let extra) = action { delay += extra }
        }
        let requestID: String
        if case .broadcast(let id) = answer { requestID = id } else { requestID = headers["apns-request-id"]?.first ?? UUID().uuidString.lowercased() }
        let recorded: RecordedBroadcast?
        if case .broadcast(let id) = answer, case .broadcast(let bundleID) = route {
            recorded = RecordedBroadcast(
                bundleID: bundleID, channelID: channel ?? "", requestID: id, headers: headers.compactMapValues(\.first), payload: body,
                connection: connection.number)
        } else {
            recorded = nil
        }
        let send = { [self] in
            var responseHeaders = HTTPHeaders([("apns-request-id", requestID)])
            var bodyBuffer: ByteBuffer?
            let status: Int
            switch answer {
            case .broadcast:
                status = 200
                if let recorded { self.server.state.record(recorded) }
            case .management(let code, let extra, let json):
                status = code
                for (name, value) in extra { responseHeaders.add(name: name, value: value) }
                if !json.isEmpty {
                    responseHeaders.add(name: "content-type", value: "application/json")
                    bodyBuffer = context.channel.allocator.buffer(bytes: json)
                }
            case .reject(let reason):
                status = reason.status
                bodyBuffer = Self.errorBody(reason, timestamp: nil, headers: &responseHeaders, context: context)
            }
            self.write(
                status: status, headers: responseHeaders, body: bodyBuffer, accepted: status < 300, faultToken: "", faultChannel: channel,
                context: context, parent: parent)
        }
        if delay == .zero {
            send()
        } else {
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(delay / .nanoseconds(1)))) { send() }
        }
    }

    /// FCM's token endpoint or messages:send, answered on the stream's event loop (after a
    /// scripted latency, if any).
    private func respondAsFCM(
        _ fcm: MockFCMService, _ route: MockFCMService.Route, sentTo: String, headers: [String: [String]], context: ChannelHandlerContext, parent: Channel
    ) {
        var delay = Duration.zero
        if case .send = route {
            for action in server.state.firingFaults(token: sentTo, where: { if case .latency = $0 { true } else { false } }) {
                if case .latency(let latency) = action { delay += latency }
            }
        }
        let (method, body, number, token) = (head?.method.rawValue ?? "", self.body, connection.number, sentTo)
        let respond = { [self] in
            let answer = fcm.answer(route, method: method, headers: headers, body: body, connection: number)
            if let accepted = answer.accepted { server.state.record(accepted) }
            var responseHeaders = HTTPHeaders()
            for (name, value) in answer.headers.sorted(by: { $0.key < $1.key }) { responseHeaders.add(name: name, value: value) }
            write(
                status: answer.status, headers: responseHeaders, body: context.channel.allocator.buffer(bytes: answer.body), accepted: answer.status == 200,
                faultToken: token, faultChannel: nil, context: context, parent: parent)
        }
        if delay == .zero {
            respond()
        } else {
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(delay / .nanoseconds(1)))) { respond() }
        }
    }

    /// Writes one answer and does a stream's bookkeeping: counters, the stream limit raised after
    /// the first accepted request, a planned GOAWAY.
    private func write(
        status: Int, headers: HTTPHeaders, body bodyBuffer: ByteBuffer?, accepted: Bool, faultToken: String, faultChannel: String?,
        context: ChannelHandlerContext, parent: Channel
    ) {
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http2, status: .init(statusCode: status), headers: headers))), promise: nil)
        if let bodyBuffer { context.write(wrapOutboundOut(.body(.byteBuffer(bodyBuffer))), promise: nil) }
        connection.answersUnwritten += 1
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { [connection] _ in
            connection.answersUnwritten -= 1
        }
        connection.answered += 1
        connection.inFlight -= 1
        server.state.requestFinished()

        if accepted, !connection.raisedStreamLimit {
            // APNs lets a new connection have one stream until a request is accepted.
            connection.raisedStreamLimit = true
            let settings = HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([
                HTTP2Setting(parameter: .maxConcurrentStreams, value: server.configuration.maxConcurrentStreams)
            ])))
            parent.writeAndFlush(settings, promise: nil)
        }
        let answered = connection.answered
        if !connection.closing, !server.state.firingFaults(token: faultToken, channel: faultChannel, where: {
            if case .goAway(let after) = $0 { return answered == after }
            return false
        }).isEmpty {
            goAway(parent)
        }
    }

    /// GOAWAY naming the highest stream the client has opened: every stream the server has taken
    /// is answered, and only streams opened after the GOAWAY are refused, for the client to send
    /// elsewhere. (Naming the stream being answered instead, which this mock once did, told the
    /// client that streams above it, answered out of order and already delivered, were never
    /// processed: the client sent them again and devices got them twice.)
    private func goAway(_ parent: Channel) {
        sendGoAway(parent)
        Self.closeWhenDrained(parent, connection, grace: Self.goAwayGrace)
    }

    private func sendGoAway(_ parent: Channel) {
        guard connection.goAwayLastStream == nil else { return }
        connection.closing = true
        let lastID = HTTP2StreamID(connection.highestStream)
        connection.goAwayLastStream = connection.highestStream
        let frame = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: lastID, errorCode: .noError, opaqueData: nil))
        parent.writeAndFlush(frame, promise: nil)
    }

    /// How long a draining connection waits for the client to close it.
    static let goAwayGrace: TimeAmount = .seconds(10)

    /// Closes the connection after `grace` unless the client has closed it by then, and never
    /// while a request up to the GOAWAY's last stream is unanswered or an answer unwritten: a
    /// client slow to read (a loaded machine) still gets every answer.
    private static func closeWhenDrained(_ parent: Channel, _ connection: MockConnection, grace: TimeAmount) {
        parent.eventLoop.assumeIsolated().scheduleTask(in: grace) {
            guard parent.isActive else { return }
            if connection.inFlight == 0 && connection.answersUnwritten == 0 {
                parent.close(promise: nil)
            } else {
                closeWhenDrained(parent, connection, grace: .milliseconds(100))
            }
        }
    }

    /// Drops the connection with a TCP reset, answering nothing.
    private func reset(_ parent: Channel) {
        connection.closing = true
        guard let socket = parent as? SocketOptionProvider else {
            parent.close(promise: nil)
            return
        }
        socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in parent.close(promise: nil) }
    }
}
