import CRabbitMQ
import Foundation

/// One open librabbitmq connection with channel 1 open: the only owner of the C handle.
///
/// Not thread-safe, by design: librabbitmq allows one thread per connection, so a handle is
/// created, used and destroyed on its driver's I/O thread only.
final class ConnectionHandle {
    static let channel: amqp_channel_t = 1
    /// For passive declares: the broker closes a channel whose passive declare fails, and that
    /// must not be the channel that carries publishes and their confirms.
    static let inspectionChannel: amqp_channel_t = 2

    let state: amqp_connection_state_t
    private var isOpen = true
    private var inspectionChannelOpen = false

    /// False once the connection failed or was closed.
    var isUsable: Bool { isOpen }

    /// Publishes and settlements encoded for one write per turn of the I/O loop; nil over TLS,
    /// whose socket only the library writes. Empty whenever the library is called, so that the
    /// frames of the two never interleave.
    var outbound: OutboundFrames?
    /// Checks a message before the library writes it (TLS, a body larger than a frame).
    private(set) var frames = OutboundFrames(frameMax: 131_072)
    /// How long a write may find the socket full with nothing heard from the broker: two
    /// heartbeats, as the broker itself waits; nil without heartbeats.
    private var stall: Duration?
    /// librabbitmq's time limit for a synchronous reply, as configured.
    private var rpcTimeout: Duration = .seconds(10)

    /// How long a quorum queue's declaration waits for the broker's answer. RabbitMQ answers once
    /// the queue's Raft cluster has started, or has failed to (`cluster_not_formed`, after 15 s on
    /// 3.10), and it removes a queue that failed *before* it answers. A client that gives up
    /// first and declares again is told declare-ok for a queue about to be removed, and its
    /// binding or consumer then finds no queue; one that waits for the answer declares the queue
    /// anew.
    static let quorumDeclarationTimeout: Duration = .seconds(30)

    private init(state: amqp_connection_state_t) {
        self.state = state
    }

    deinit {
        amqp_destroy_connection(state)
    }

    /// Connects, logs in and opens channel 1, each step bounded by the configured timeouts.
    static func open(_ configuration: AMQPConfiguration, at address: AMQPAddress) throws -> ConnectionHandle {
        guard let state = amqp_new_connection() else {
            throw AMQPError(.library, "librabbitmq could not allocate a connection")
        }
        // From here on the handle's deinit frees the C state on every path, the socket with it.
        let handle = ConnectionHandle(state: state)
        let target = address.redactedURL
        let socket = try handle.makeSocket(address.tls)

        var connectTimeout = timeval(configuration.connectTimeout)
        let opened = amqp_socket_open_noblock(socket, address.host, Int32(address.port), &connectTimeout)
        if opened != AMQP_STATUS_OK.rawValue {
            handle.isOpen = false
            let error = AMQPStatus.error(
                opened, during: "connecting to \(target)", default: .connectionFailed,
                timeout: configuration.connectTimeout)
            throw AMQPError(error.kind, "\(error.message); no broker accepted a connection at \(address.node)")
        }

        var handshakeTimeout = timeval(configuration.handshakeTimeout)
        var rpcTimeout = timeval(configuration.rpcTimeout)
        amqp_set_handshake_timeout(state, &handshakeTimeout)
        amqp_set_rpc_timeout(state, &rpcTimeout)
        handle.rpcTimeout = configuration.rpcTimeout

        let heartbeat = Int32(configuration.heartbeat.components.seconds)
        let login: amqp_rpc_reply_t = CArena.with { arena in
            var clientProperties = arena.table([
                "connection_name": .string(configuration.connectionName),
                "product": "pushworker",
                "platform": "Swift",
                "capabilities": .table([
                    "publisher_confirms": true,
                    "consumer_cancel_notify": true,
                    "connection.blocked": true,
                    "authentication_failure_close": true,
                    "basic.nack": true,
                ]),
            ])
            return pw_amqp_login_plain(
                state, address.vhost, 0, 131_072, heartbeat, &clientProperties,
                address.user, address.password)
        }
        do {
            try handle.check(login, during: "logging in to \(target) as '\(address.user)'", timeout: configuration.handshakeTimeout)
        } catch let error as AMQPError where error.replyCode == 403 || error.replyCode == 530 {
            handle.isOpen = false
            throw AMQPError(.accessRefused, error.message, replyCode: error.replyCode, replyText: error.replyText)
        } catch {
            handle.isOpen = false
            throw error
        }

        amqp_channel_open(state, channel)
        try handle.check(amqp_get_rpc_reply(state), during: "opening a channel on \(target)", timeout: configuration.rpcTimeout)
        handle.frames = OutboundFrames(frameMax: Int(amqp_get_frame_max(state)))
        if address.tls == nil { handle.outbound = handle.frames }
        let heartbeatSeconds = amqp_get_heartbeat(state)  // as negotiated with the broker
        handle.stall = heartbeatSeconds > 0 ? .seconds(2 * Int(heartbeatSeconds)) : nil
        return handle
    }

    /// Writes the frames waiting in `outbound`, if any: before the library writes anything, and
    /// at the end of each turn. A failed write leaves the connection unusable.
    func flush() throws(AMQPError) {
        guard outbound?.isEmpty == false else { return }
        do {
            try outbound!.write(to: socketDescriptor, stall: stall)
        } catch {
            markBroken()
            throw error
        }
    }

    private func makeSocket(_ tls: AMQPTLSConfiguration?) throws -> OpaquePointer {
        guard let tls else {
            guard let socket = amqp_tcp_socket_new(state) else {
                throw AMQPError(.library, "librabbitmq could not create a TCP socket")
            }
            return socket
        }
        guard let socket = amqp_ssl_socket_new(state) else {
            throw AMQPError(.tls, "librabbitmq could not create a TLS socket")
        }
        amqp_ssl_socket_set_verify_peer(socket, tls.verifyPeer ? 1 : 0)
        amqp_ssl_socket_set_verify_hostname(socket, tls.verifyHostname ? 1 : 0)
        if let caFile = tls.caFile {
            let status = amqp_ssl_socket_set_cacert(socket, caFile)
            guard status == AMQP_STATUS_OK.rawValue else {
                throw AMQPError(.tls, "cannot load the CA file '\(caFile)': \(AMQPStatus.text(status))")
            }
        }
        if let certificateFile = tls.certificateFile, let keyFile = tls.keyFile {
            let status = amqp_ssl_socket_set_key(socket, certificateFile, keyFile)
            guard status == AMQP_STATUS_OK.rawValue else {
                throw AMQPError(.tls, "cannot load the client certificate '\(certificateFile)' and key '\(keyFile)': \(AMQPStatus.text(status))")
            }
        }
        return socket
    }

    /// Turns an RPC reply into a Swift error. A broker-side close is acknowledged (close-ok) so
    /// the broker can release the connection at once, and the handle is marked closed.
    func check(_ reply: amqp_rpc_reply_t, during context: String, timeout: Duration? = nil) throws {
        switch reply.reply_type {
        case AMQP_RESPONSE_NORMAL:
            return
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            isOpen = false
            throw AMQPStatus.error(reply.library_error, during: context, default: .connectionLost, timeout: timeout)
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            throw serverClose(id: reply.reply.id, decoded: reply.reply.decoded, during: context)
        default:
            isOpen = false
            throw AMQPError(.library, "\(context): librabbitmq returned no reply")
        }
    }

    /// The time a declaration of `queue` waits for the broker's answer.
    func declarationTimeout(for queue: AMQPTopology.Queue) -> Duration {
        queue.isQuorum ? max(rpcTimeout, Self.quorumDeclarationTimeout) : rpcTimeout
    }

    /// Runs `body`, whose library calls wait up to `timeout` for a synchronous reply, then
    /// restores the configured limit.
    func withRPCTimeout<T>(_ timeout: Duration, _ body: () throws -> T) rethrows -> T {
        guard timeout != rpcTimeout else { return try body() }
        var longer = timeval(timeout)
        amqp_set_rpc_timeout(state, &longer)
        defer {
            var configured = timeval(rpcTimeout)
            amqp_set_rpc_timeout(state, &configured)
        }
        return try body()
    }

    /// Carries out `operation` on the inspection channel, so a refusal closes that channel only.
    /// Frames for channel 1 that arrive meanwhile are queued by librabbitmq and read by the next
    /// `readFrames`. Returns the queue's status for `inspect` (nil: no such queue) and `declare`.
    func perform(_ operation: AMQPQueueOperation, timeout: Duration) throws -> AMQPQueueStatus? {
        let channel = Self.inspectionChannel
        if !inspectionChannelOpen {
            amqp_channel_open(state, channel)
            try check(amqp_get_rpc_reply(state), during: "opening the inspection channel", timeout: timeout)
            inspectionChannelOpen = true
        }
        var timeout = timeout
        if case .declare(let queue) = operation { timeout = max(timeout, declarationTimeout(for: queue)) }
        let (context, status): (String, AMQPQueueStatus?) = withRPCTimeout(timeout) { CArena.with { arena in
            switch operation {
            case .inspect(let queue):
                let ok = amqp_queue_declare(state, channel, arena.bytes(queue), 1, 0, 0, 0, arena.table([:]))
                return ("checking queue '\(queue)'", ok.map { AMQPQueueStatus(messages: Int($0.pointee.message_count), consumers: Int($0.pointee.consumer_count)) })
            case .declare(let queue):
                let ok = amqp_queue_declare(
                    state, channel, arena.bytes(queue.name), 0, queue.durable ? 1 : 0, queue.exclusive ? 1 : 0,
                    queue.autoDelete ? 1 : 0, arena.table(queue.arguments))
                return ("declaring queue '\(queue.name)'", ok.map { AMQPQueueStatus(messages: Int($0.pointee.message_count), consumers: Int($0.pointee.consumer_count)) })
            case .delete(let queue, let ifEmpty):
                _ = amqp_queue_delete(state, channel, arena.bytes(queue), 0, ifEmpty ? 1 : 0)
                return ("deleting queue '\(queue)'", nil)
            case .bind(let binding):
                _ = amqp_queue_bind(
                    state, channel, arena.bytes(binding.queue), arena.bytes(binding.exchange), arena.bytes(binding.routingKey),
                    arena.table(binding.arguments))
                return ("binding queue '\(binding.queue)' to exchange '\(binding.exchange)'", nil)
            case .unbind(let binding):
                _ = amqp_queue_unbind(
                    state, channel, arena.bytes(binding.queue), arena.bytes(binding.exchange), arena.bytes(binding.routingKey),
                    arena.table(binding.arguments))
                return ("unbinding queue '\(binding.queue)' from exchange '\(binding.exchange)'", nil)
            }
        } }
        let reply = amqp_get_rpc_reply(state)
        if reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION, reply.reply.id == PW_CHANNEL_CLOSE, let decoded = reply.reply.decoded {
            let close = decoded.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
            var ok = amqp_channel_close_ok_t()
            _ = amqp_send_method(state, channel, PW_CHANNEL_CLOSE_OK, &ok)
            inspectionChannelOpen = false
            if case .inspect = operation, close.reply_code == 404 { return nil }
            throw AMQPError(
                .brokerClosed, "\(context): the broker refused", replyCode: close.reply_code,
                replyText: CDecoding.string(close.reply_text))
        }
        try check(reply, during: context, timeout: timeout)
        return status
    }

    /// Cancels a consumer of the consuming channel and waits for the broker's cancel-ok; frames
    /// that arrive meanwhile are queued by librabbitmq.
    func cancel(consumerTag: String, timeout: Duration) throws {
        withRPCTimeout(timeout) {
            CArena.with { arena in
                _ = amqp_basic_cancel(state, Self.channel, arena.bytes(consumerTag))
            }
        }
        try check(amqp_get_rpc_reply(state), during: "cancelling consumer '\(consumerTag)'", timeout: timeout)
    }

    /// Answers a broker-initiated channel.close or connection.close and describes it as an error.
    func serverClose(id: amqp_method_number_t, decoded: UnsafeMutableRawPointer?, during context: String) -> AMQPError {
        isOpen = false
        if id == PW_CONNECTION_CLOSE, let decoded {
            let close = decoded.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
            var ok = amqp_connection_close_ok_t()
            _ = amqp_send_method(state, 0, PW_CONNECTION_CLOSE_OK, &ok)
            return AMQPError(
                .brokerClosed, "\(context): the broker closed the connection", replyCode: close.reply_code,
                replyText: CDecoding.string(close.reply_text))
        }
        if id == PW_CHANNEL_CLOSE, let decoded {
            let close = decoded.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
            var ok = amqp_channel_close_ok_t()
            _ = amqp_send_method(state, Self.channel, PW_CHANNEL_CLOSE_OK, &ok)
            return AMQPError(
                .brokerClosed, "\(context): the broker closed the channel", replyCode: close.reply_code,
                replyText: CDecoding.string(close.reply_text))
        }
        return AMQPError(.library, "\(context): unexpected method 0x\(String(id, radix: 16)) from the broker")
    }

    /// Closes channel and connection politely when they are still usable; the broker then
    /// requeues unacknowledged deliveries at once instead of waiting for a heartbeat timeout.
    func close() {
        guard isOpen else { return }
        isOpen = false
        _ = amqp_channel_close(state, Self.channel, AMQP_REPLY_SUCCESS)
        _ = amqp_connection_close(state, AMQP_REPLY_SUCCESS)
    }

    /// Marks the connection unusable after an I/O error, so `close()` does not wait on a dead socket.
    func markBroken() {
        isOpen = false
    }

    var socketDescriptor: Int32 {
        amqp_get_sockfd(state)
    }

    /// Frames or bytes librabbitmq took from the socket and has not handed out. It cannot see
    /// OpenSSL's own buffer: on TLS connections that holds at most part of one record, because
    /// librabbitmq 0.11 does not turn read-ahead on (if it ever did, the loop's early returns
    /// would leave whole frames there, unseen by `poll`).
    var hasBufferedInput: Bool {
        amqp_frames_enqueued(state) != 0 || amqp_data_in_buffer(state) != 0
    }
}

extension timeval {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.init(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }
}
