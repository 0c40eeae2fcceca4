import CRabbitMQ
import DequeModule
import Foundation
import Logging
import Synchronization

/// Owns one AMQP connection and the thread that drives it: connects, declares the topology,
/// publishes with confirms, consumes, settles deliveries, services heartbeats, and reconnects
/// with backoff when the connection dies.
///
/// Every member below the mailbox is touched by the I/O thread only; other tasks reach the
/// thread through `Mailbox`. That is what makes the `@unchecked Sendable` sound.
final class ConnectionDriver: @unchecked Sendable {
    let configuration: AMQPConfiguration
    let confirms: Bool
    let consume: ConsumeSpecification?
    private let deliveries: DeliverySink?
    /// I/O thread only once started: its `amqp` metadata names the node connected to.
    private var logger: Logger
    let mailbox = Mailbox()
    private let publishedGeneration = Atomic<UInt64>(0)

    // I/O thread only.
    /// Connecting, open, closing or closed, with the handle, the generation and the attempts.
    private var lifecycle: ConnectionLifecycle<ConnectionHandle>
    private var confirmWindow = ConfirmWindow()
    /// Publishes waiting for room in the confirm window, first in first out.
    private var waiting = Deque<PendingPublish>()
    private var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
    /// Delivery tags handed out on this connection and not yet settled, so acks can be coalesced.
    private var unsettled = UnsettledTags()
    /// The broker cancelled the consumer: a reconnect must not consume again. The consumer's
    /// life, not the connection's, so it outlives reconnects.
    private var consumerCancelled = false
    /// When librabbitmq last read (or found nothing): it must be called once a poll interval.
    private var lastRead = ContinuousClock.now

    init(
        configuration: AMQPConfiguration, confirms: Bool, consume: ConsumeSpecification?,
        deliveries: DeliverySink?, logger: Logger
    ) {
        self.configuration = configuration
        self.confirms = confirms
        self.consume = consume
        self.deliveries = deliveries
        self.logger = logger
        self.lifecycle = ConnectionLifecycle(addressCount: configuration.addresses.count)
    }

    /// Starts the I/O thread and returns once the first connection is up and the topology is
    /// declared, or throws the reason it could not be: a misconfigured worker should fail at
    /// start-up, not retry forever in silence. With `waitsForBroker`, a broker not reachable yet,
    /// or not able to form a new quorum queue yet, is retried (each attempt logged and reported);
    /// one that answers and refuses still throws.
    func start() async throws {
        try await withCheckedThrowingContinuation { (startup: CheckedContinuation<Void, Error>) in
            // Named from inside: Foundation on Linux does not give the thread a name set before
            // its start. `top -H` and `bench.sh transactional` (THREADS=1) show it by this name.
            let name = consume == nil ? "amqp-publish" : "amqp-consume"
            let thread = Thread { [self] in
                Thread.current.name = name
                self.run(startup: startup)
            }
            thread.start()
        }
    }

    /// Returns false, after failing the command's waiter, when the connection is closed.
    @discardableResult
    func post(_ command: DriverCommand) -> Bool {
        guard mailbox.post(command) else {
            Self.refuse(command)
            return false
        }
        return true
    }

    /// The generation of the connection now up, readable from any thread, so settling a delivery
    /// of an earlier connection fails at once in the caller.
    var currentGeneration: UInt64 {
        publishedGeneration.load(ordering: .acquiring)
    }

    private static func refuse(_ command: DriverCommand) {
        let closed = AMQPError(.closed, "the AMQP connection has been closed")
        switch command {
        case .publish(let pending): pending.fail(closed)
        case .settle: break
        case .queue(_, let continuation): continuation.resume(throwing: closed)
        case .shutdown(let continuation): continuation?.resume()
        }
    }

    // MARK: - The I/O thread

    private func run(startup: CheckedContinuation<Void, Error>) {
        var startup: CheckedContinuation<Void, Error>? = startup
        // A node that answered during the start, though it could not form a quorum queue: a start
        // that fails after it does not say that no node could be reached.
        var answered: AMQPError?
        while !lifecycle.isShuttingDown {
            if lifecycle.connection == nil {
                do {
                    try connect()
                    startup?.resume()
                    startup = nil
                } catch let error as AMQPError {
                    configuration.onConnectionEvent?(.attemptFailed(error))
                    if let first = startup {
                        // Every node is tried before a start fails on an unreachable broker.
                        let untried = lifecycle.failedAttempts + 1 < configuration.addresses.count
                        guard Self.brokerNotReady(error), configuration.waitsForBroker || untried else {
                            let failure = configuration.addresses.count > 1 && Self.brokerNotReachable(error)
                                ? answered ?? AMQPError(error.kind, "no broker node of \(configuration.addresses.count) could be reached (\(configuration.redactedURLs)); the last: \(error.message)")
                                : error
                            first.resume(throwing: failure)
                            finish(failure)
                            return
                        }
                        if error.isClusterNotFormed || error.declaredQueueRemoved { answered = error }
                        logger.warning(
                            error.isClusterNotFormed ? "the broker cannot form a quorum queue's cluster yet; retrying"
                                : error.declaredQueueRemoved ? "the broker removed a queue just declared; declaring again"
                                : "the broker cannot be reached yet; retrying",
                            metadata: ["error": "\(error)", "attempt": "\(lifecycle.failedAttempts + 1)"])
                    } else {
                        logger.warning("AMQP reconnect failed", metadata: ["error": "\(error)"])
                    }
                    backoff()
                    continue
                } catch {
                    preconditionFailure("unexpected error \(error)")
                }
            }
            do {
                try serviceOnce()
            } catch let error as AMQPError {
                connectionLost(error)
            } catch {
                preconditionFailure("unexpected error \(error)")
            }
        }
        // Shut down while still waiting for the broker: the start ends too.
        startup?.resume(throwing: AMQPError(.closed, "closed before the broker could be reached"))
        drainBeforeClose()
        finish(AMQPError(.closed, "the AMQP connection has been closed"))
    }

    /// Failures that a broker still starting (or a network not up yet) gives, as opposed to a
    /// broker that answers and refuses.
    private static func brokerNotReachable(_ error: AMQPError) -> Bool {
        switch error.kind {
        case .connectionFailed, .timeout, .connectionLost: true
        default: false
        }
    }

    /// Those, a quorum queue whose cluster the broker has not formed yet
    /// (``AMQPError/isClusterNotFormed``), which declaring again once the nodes answer mends, and
    /// a queue the broker removed just after declaring it (``AMQPError/declaredQueueRemoved``).
    private static func brokerNotReady(_ error: AMQPError) -> Bool {
        brokerNotReachable(error) || error.isClusterNotFormed || error.declaredQueueRemoved
    }

    /// Connects to the current address; on failure the next attempt goes to the next address.
    private func connect() throws {
        let address = configuration.addresses[lifecycle.addressIndex]
        logger[metadataKey: "amqp"] = "\(address.redactedURL)"
        let handle: ConnectionHandle
        do {
            handle = try ConnectionHandle.open(configuration, at: address)
            try configure(handle)
        } catch {
            lifecycle.attemptFailed()
            throw error
        }
        // The window was reset (its waiters failed) when the last connection was lost.
        assert(confirmWindow.isEmpty, "publishes of a lost connection still wait for confirms")
        let established = lifecycle.connected(handle)
        publishedGeneration.store(lifecycle.generation, ordering: .releasing)
        unsettled = UnsettledTags()
        if established.attempts > 1 || established.failover {
            logger.notice(
                established.failover ? "AMQP connection failed over to another node" : "AMQP connection established",
                metadata: ["attempts": "\(established.attempts)"])
        } else if configuration.addresses.count > 1 {
            logger.info("AMQP connection established", metadata: ["nodes": "\(configuration.addresses.count)"])
        }
        configuration.onConnectionEvent?(.connected(reconnected: established.reconnected, address: address, failover: established.failover))
    }

    /// Declares the topology, enables confirms and starts consuming on a fresh connection.
    private func configure(_ handle: ConnectionHandle) throws {
        try declare(configuration.topology, on: handle)
        if confirms {
            amqp_confirm_select(handle.state, ConnectionHandle.channel)
            try handle.check(amqp_get_rpc_reply(handle.state), during: "enabling publisher confirms", timeout: configuration.rpcTimeout)
        }
        if let consume, !consumerCancelled {
            // basic.qos (not global) applies to the consumers started after it on the channel:
            // each subscription gets its own prefetch.
            for subscription in consume.subscriptions {
                amqp_basic_qos(handle.state, ConnectionHandle.channel, 0, subscription.prefetch, 0)
                try handle.check(
                    amqp_get_rpc_reply(handle.state), during: "setting prefetch \(subscription.prefetch)", timeout: configuration.rpcTimeout)
                CArena.with { arena in
                    _ = amqp_basic_consume(
                        handle.state, ConnectionHandle.channel, arena.bytes(subscription.queue), arena.bytes(subscription.consumerTag),
                        0, 0, 0, arena.table(consume.arguments))
                }
                try declared(subscription.queue) {
                    try handle.check(
                        amqp_get_rpc_reply(handle.state), during: "consuming from queue '\(subscription.queue)'", timeout: configuration.rpcTimeout)
                }
            }
        }
    }

    /// Runs `step`, which uses `queue`; the broker's "no queue" (404) for a queue of the topology,
    /// declared moments ago, is marked as such (``AMQPError/declaredQueueRemoved``). Its 404 for a
    /// missing exchange is not: declaring again cannot mend that.
    private func declared(_ queue: String, _ step: () throws -> Void) throws {
        do {
            try step()
        } catch let error as AMQPError
            where error.replyCode == 404 && error.replyText?.contains("no queue '\(queue)'") == true
            && configuration.topology.queues.contains(where: { $0.name == queue })
        {
            throw error.declaredQueueWasRemoved()
        }
    }

    private func declare(_ topology: AMQPTopology, on handle: ConnectionHandle) throws {
        let state = handle.state
        let channel = ConnectionHandle.channel
        for exchange in topology.exchanges {
            CArena.with { arena in
                _ = amqp_exchange_declare(
                    state, channel, arena.bytes(exchange.name), arena.bytes(exchange.type), 0,
                    exchange.durable ? 1 : 0, exchange.autoDelete ? 1 : 0, exchange.isInternal ? 1 : 0,
                    arena.table(exchange.arguments))
            }
            try handle.check(amqp_get_rpc_reply(state), during: "declaring exchange '\(exchange.name)'", timeout: configuration.rpcTimeout)
        }
        for queue in topology.queues {
            let timeout = handle.declarationTimeout(for: queue)
            try handle.withRPCTimeout(timeout) {
                CArena.with { arena in
                    _ = amqp_queue_declare(
                        state, channel, arena.bytes(queue.name), 0, queue.durable ? 1 : 0, queue.exclusive ? 1 : 0,
                        queue.autoDelete ? 1 : 0, arena.table(queue.arguments))
                }
                try handle.check(amqp_get_rpc_reply(state), during: "declaring queue '\(queue.name)'", timeout: timeout)
            }
        }
        for binding in topology.bindings {
            CArena.with { arena in
                _ = amqp_queue_bind(
                    state, channel, arena.bytes(binding.queue), arena.bytes(binding.exchange),
                    arena.bytes(binding.routingKey), arena.table(binding.arguments))
            }
            try declared(binding.queue) {
                try handle.check(
                    amqp_get_rpc_reply(state),
                    during: "binding queue '\(binding.queue)' to exchange '\(binding.exchange)' with key '\(binding.routingKey)'",
                    timeout: configuration.rpcTimeout)
            }
        }
    }

    /// One turn of the loop: carry out queued commands, send what the confirm window allows,
    /// wait for input or a wake-up, then read every frame that is ready.
    private func serviceOnce() throws {
        guard let handle = lifecycle.connection else { return }
        try execute(mailbox.take(), on: handle)
        try sendWaiting(on: handle)
        var mayRead = true
        if !handle.hasBufferedInput && !lifecycle.isShuttingDown && mailbox.beginWait() {
            mayRead = wait(for: handle.socketDescriptor, milliseconds: pollInterval)
            mailbox.endWait()
        }
        // Woken only by a command, with nothing from the broker: librabbitmq would try a read and
        // a poll to find nothing. It is still called once a poll interval, for its heartbeats.
        if mayRead || ContinuousClock.now - lastRead >= .milliseconds(Int(pollInterval)) {
            lastRead = .now
            try readFrames(on: handle, budget: 4096)
        }
        amqp_maybe_release_buffers(handle.state)
        if confirmWindow.nackStreakExceeds(Self.nackStreakLimit) {
            // Seen on RabbitMQ 3.10: a channel opened while a quorum queue's leader was being
            // elected after its node died nacks every later publish to that queue, while a new
            // connection's publishes are taken. Only a new connection gets out of it.
            throw AMQPError(.connectionLost, "the broker nacked every publish for \(Self.nackStreakLimit) (a quorum queue's leader lost with its node?); reconnecting")
        }
    }

    static let nackStreakLimit: Duration = .seconds(1)

    /// Short enough that librabbitmq sends heartbeats in time (they go out only inside its calls).
    private var pollInterval: Int32 {
        let heartbeat = Int(configuration.heartbeat / .milliseconds(1))
        return Int32(heartbeat > 0 ? min(250, max(heartbeat / 4, 10)) : 250)
    }

    /// Carries out a batch of commands. Plain acks are gathered and sent as few frames as
    /// possible: one `multiple` ack covers every tag up to the oldest delivery still unsettled,
    /// which spares the broker (a quorum queue logs every settlement) most of the work.
    private func execute(_ commands: [DriverCommand], on handle: ConnectionHandle) throws {
        var acks = SettlementBatch()
        for (index, command) in commands.enumerated() {
            if case .settle(.ack(multiple: false), let deliveryGeneration, let tag) = command, deliveryGeneration == lifecycle.generation {
                acks.add(tag)
                continue
            }
            do {
                try execute(command, on: handle)
            } catch {
                // The connection died: the rest of the batch waits for the next one (publishes go
                // out on it, settlements of this connection's deliveries are dropped as stale),
                // rather than being lost with their waiters.
                for rest in commands[(index + 1)...] where !mailbox.post(rest) { Self.refuse(rest) }
                throw error
            }
        }
        try acks.send(settling: &unsettled) { tag, multiple in
            try send(.ack(multiple: multiple), tag: tag, on: handle)
        }
        try handle.flush()
    }

    private func send(_ settlement: DriverCommand.Settlement, tag: UInt64, on handle: ConnectionHandle) throws {
        if handle.outbound != nil {
            handle.outbound!.append(settlement, tag: tag, channel: ConnectionHandle.channel)
            return
        }
        let status: Int32
        switch settlement {
        case .ack(let multiple):
            status = amqp_basic_ack(handle.state, ConnectionHandle.channel, tag, multiple ? 1 : 0)
        case .nack(let multiple, let requeue):
            status = amqp_basic_nack(handle.state, ConnectionHandle.channel, tag, multiple ? 1 : 0, requeue ? 1 : 0)
        case .reject(let requeue):
            status = amqp_basic_reject(handle.state, ConnectionHandle.channel, tag, requeue ? 1 : 0)
        }
        guard status == AMQP_STATUS_OK.rawValue else {
            throw AMQPStatus.error(status, during: "settling delivery \(tag)", default: .connectionLost)
        }
    }

    private func execute(_ command: DriverCommand, on handle: ConnectionHandle) throws {
        switch command {
        case .publish(let pending):
            waiting.append(pending)
        case .settle(let settlement, let deliveryGeneration, let tag):
            guard deliveryGeneration == lifecycle.generation else {
                // The connection changed after the caller checked; the broker redelivers it.
                logger.debug("dropping the settlement of a delivery from an earlier connection", metadata: ["delivery_tag": "\(tag)"])
                return
            }
            unsettled.settle(settlement, tag: tag)
            try send(settlement, tag: tag, on: handle)
        case .queue(let operation, let continuation):
            do {
                // The library writes the operation's frames: what waits goes first.
                try handle.flush()
                continuation.resume(returning: try handle.perform(operation, timeout: configuration.rpcTimeout))
            } catch {
                continuation.resume(throwing: error)
                // A refusal closes only the inspection channel; anything else lost the connection.
                if !handle.isUsable { throw error }
            }
        case .shutdown(let continuation):
            requestShutdown(continuation)
        }
    }

    /// Publishes what the confirm window has room for: encoded into the connection's outbound
    /// frames and written once at the end, or (TLS, a body larger than a frame) by the library.
    private func sendWaiting(on handle: ConnectionHandle) throws {
        // Without confirms a publish is done once written: these wait for the write.
        var written: [PendingPublish] = []
        defer {
            // Thrown before the write: they may not have reached the broker.
            for pending in written {
                pending.fail(AMQPError(.connectionLost, "the connection was lost while publishing; the message may not have reached the broker, publish it again"))
            }
        }
        while confirmWindow.count < configuration.maxUnconfirmedPublishes, let next = waiting.first {
            if handle.outbound?.fits(next.message) == true {
                let pending = waiting.removeFirst()
                do {
                    try handle.outbound!.append(publish: pending.message, channel: ConnectionHandle.channel)
                } catch {
                    pending.fail(Self.encodingError(error, of: pending.message))
                    continue
                }
                if confirms { confirmWindow.append(pending) } else { written.append(pending) }
                if handle.outbound!.count >= OutboundFrames.flushThreshold { try flush() }
                continue
            }
            // Written before this one is taken: should the write fail, it stays for the next connection.
            try flush()
            let pending = waiting.removeFirst()
            do {
                try handle.frames.check(pending.message)
            } catch {
                pending.fail(Self.encodingError(error, of: pending.message))
                continue
            }
            let status = Self.publish(pending.message, on: handle)
            switch status {
            case AMQP_STATUS_OK.rawValue:
                if confirms {
                    confirmWindow.append(pending)
                } else {
                    pending.succeed()
                }
            case AMQP_STATUS_TABLE_TOO_BIG.rawValue, AMQP_STATUS_INVALID_PARAMETER.rawValue, AMQP_STATUS_BAD_AMQP_DATA.rawValue:
                // The header checked above, only the body is left, which cannot fail to encode.
                pending.fail(AMQPStatus.error(status, during: "encoding a message for exchange '\(pending.message.exchange.prefix(64))'", default: .library))
            default:
                let error = AMQPStatus.error(status, during: "publishing", default: .connectionLost)
                pending.fail(AMQPError(.connectionLost, "\(error.message); the message may not have reached the broker, publish it again"))
                throw error
            }
        }
        try flush()

        func flush() throws {
            try handle.flush()
            for pending in written { pending.succeed() }
            written.removeAll()
        }
    }

    private static func encodingError(_ error: OutboundFrames.EncodingError, of message: AMQPMessage) -> AMQPError {
        AMQPError(.library, "encoding a message for exchange '\(message.exchange.prefix(64))' with routing key '\(message.routingKey.prefix(64))': \(error.message)")
    }

    private static func publish(_ message: AMQPMessage, on handle: ConnectionHandle) -> Int32 {
        CArena.with { arena in
            var properties = arena.properties(message.properties)
            return message.body.withUnsafeBytes { body in
                amqp_basic_publish(
                    handle.state, ConnectionHandle.channel, arena.bytes(message.exchange), arena.bytes(message.routingKey),
                    message.mandatory ? 1 : 0, 0, &properties,
                    amqp_bytes_t(len: body.count, bytes: UnsafeMutableRawPointer(mutating: body.baseAddress)))
            }
        }
    }

    /// Waits for the broker or a command; false when only a command came (nothing to read).
    @discardableResult
    private func wait(for socket: Int32, milliseconds: Int32) -> Bool {
        var fds = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: mailbox.wakeDescriptor, events: Int16(POLLIN), revents: 0),
        ]
        let ready = poll(&fds, 2, milliseconds)
        if ready > 0 && fds[1].revents != 0 {
            mailbox.drainWake()
        }
        return ready <= 0 || fds[0].revents != 0
    }

    private func readFrames(on handle: ConnectionHandle, budget: Int) throws {
        var noWait = timeval(tv_sec: 0, tv_usec: 0)
        for _ in 0..<budget {
            var frame = amqp_frame_t()
            let status = amqp_simple_wait_frame_noblock(handle.state, &frame, &noWait)
            if status == AMQP_STATUS_TIMEOUT.rawValue { return }
            guard status == AMQP_STATUS_OK.rawValue else {
                handle.markBroken()
                throw AMQPStatus.error(status, during: "reading from the broker", default: .connectionLost)
            }
            if frame.frame_type == UInt8(AMQP_FRAME_METHOD) { try handleMethod(frame.payload.method, on: handle) }
            // Every byte read has been taken: a further call would only find the socket empty
            // (a read and a poll). What arrives meanwhile wakes the next turn's poll.
            if !handle.hasBufferedInput { return }
        }
    }

    private func handleMethod(_ method: amqp_method_t, on handle: ConnectionHandle) throws {
        switch method.id {
        case PW_BASIC_DELIVER:
            let deliver = method.decoded.assumingMemoryBound(to: amqp_basic_deliver_t.self).pointee
            let tag = deliver.delivery_tag
            let redelivered = deliver.redelivered != 0
            let exchange = CDecoding.string(deliver.exchange)
            let routingKey = CDecoding.string(deliver.routing_key)
            let consumerTag = CDecoding.string(deliver.consumer_tag)
            let content = try readContent(on: handle, streaming: consume?.streaming, during: "reading delivery \(tag)")
            unsettled.insert(tag)
            deliveries?.deliver(AMQPDelivery(
                body: content.body, streamedBody: content.receiver, bodySize: content.size, properties: content.properties,
                exchange: exchange, routingKey: routingKey, deliveryTag: tag, redelivered: redelivered, consumerTag: consumerTag, generation: lifecycle.generation, driver: self))
        case PW_BASIC_ACK:
            let ack = method.decoded.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee
            confirmWindow.confirm(upTo: ack.delivery_tag, multiple: ack.multiple != 0, acknowledged: true)
        case PW_BASIC_NACK:
            let nack = method.decoded.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee
            confirmWindow.confirm(upTo: nack.delivery_tag, multiple: nack.multiple != 0, acknowledged: false)
        case PW_BASIC_RETURN:
            let ret = method.decoded.assumingMemoryBound(to: amqp_basic_return_t.self).pointee
            let code = ret.reply_code
            let text = CDecoding.string(ret.reply_text)
            let exchange = CDecoding.string(ret.exchange)
            let routingKey = CDecoding.string(ret.routing_key)
            let content = try readContent(on: handle, streaming: nil, during: "reading a returned message")
            markReturned(exchange: exchange, routingKey: routingKey, messageID: content.properties.messageID, code: code, text: text)
        case PW_BASIC_CANCEL:
            consumerCancelled = true
            let cancel = method.decoded.assumingMemoryBound(to: amqp_basic_cancel_t.self).pointee
            let tag = CDecoding.string(cancel.consumer_tag)
            let queue = consume?.subscriptions.first { $0.consumerTag == tag }?.queue ?? consume?.queues ?? ""
            logger.error("the broker cancelled the consumer", metadata: ["queue": "\(queue)"])
            deliveries?.end(AMQPError(
                .consumerCancelled, "the broker cancelled the consumer on queue '\(queue)' (was it deleted?)"))
        case PW_CHANNEL_CLOSE, PW_CONNECTION_CLOSE:
            throw handle.serverClose(id: method.id, decoded: method.decoded, during: "while connected")
        case PW_CONNECTION_BLOCKED:
            logger.warning("the broker blocked publishing (resource alarm); publishes wait until it unblocks")
        case PW_CONNECTION_UNBLOCKED:
            logger.notice("the broker unblocked publishing")
        default:
            logger.debug("ignoring AMQP method", metadata: ["method": "0x\(String(method.id, radix: 16))"])
        }
    }

    private struct Content {
        var properties: AMQPProperties
        var size: Int
        var body: [UInt8] = []
        var receiver: (any AMQPBodyReceiver)?
    }

    /// Reads the header and body frames that follow a basic.deliver or basic.return, frame by
    /// frame (not `amqp_read_message`, which keeps every frame in the connection's pool besides
    /// a copy of the whole body): each fragment is copied into the body, or handed to a
    /// receiver when `streaming` takes bodies of this size, and its frame released at once.
    private func readContent(on handle: ConnectionHandle, streaming: AMQPBodyStreaming?, during context: String) throws -> Content {
        let header = try waitFrame(on: handle, during: context)
        guard header.frame_type == UInt8(AMQP_FRAME_HEADER) else {
            throw unexpected(header, on: handle, during: context)
        }
        let decoded = header.payload.properties.decoded.assumingMemoryBound(to: amqp_basic_properties_t.self).pointee
        let size = Int(header.payload.properties.body_size)
        var content = Content(properties: CDecoding.properties(decoded), size: size)
        if let streaming, size > streaming.threshold {
            content.receiver = streaming.makeReceiver(content.properties, size)
        } else {
            content.body.reserveCapacity(size)
        }
        var read = 0
        while read < size {
            let frame = try waitFrame(on: handle, during: context)
            guard frame.frame_type == UInt8(AMQP_FRAME_BODY) else {
                throw unexpected(frame, on: handle, during: context)
            }
            let fragment = UnsafeRawBufferPointer(start: frame.payload.body_fragment.bytes, count: frame.payload.body_fragment.len)
            if let receiver = content.receiver {
                receiver.receive(RawSpan(_unsafeBytes: fragment))
            } else {
                content.body.append(contentsOf: fragment)
            }
            read += fragment.count
            amqp_maybe_release_buffers_on_channel(handle.state, ConnectionHandle.channel)
        }
        return content
    }

    /// The next frame of our channel. Connection-level methods (channel 0: blocked, unblocked,
    /// close) may come between the frames of a message and are handled on the way.
    private func waitFrame(on handle: ConnectionHandle, during context: String) throws -> amqp_frame_t {
        while true {
            var frame = amqp_frame_t()
            let status = amqp_simple_wait_frame(handle.state, &frame)
            guard status == AMQP_STATUS_OK.rawValue else {
                handle.markBroken()
                throw AMQPStatus.error(status, during: context, default: .connectionLost)
            }
            guard frame.channel == 0 && frame.frame_type == UInt8(AMQP_FRAME_METHOD) else { return frame }
            try handleMethod(frame.payload.method, on: handle)
        }
    }

    /// A method where content belonged: the broker closing the channel or connection, or a
    /// protocol error; either way the connection cannot go on.
    private func unexpected(_ frame: amqp_frame_t, on handle: ConnectionHandle, during context: String) -> Error {
        handle.markBroken()
        if frame.frame_type == UInt8(AMQP_FRAME_METHOD),
            frame.payload.method.id == PW_CHANNEL_CLOSE || frame.payload.method.id == PW_CONNECTION_CLOSE
        {
            return handle.serverClose(id: frame.payload.method.id, decoded: frame.payload.method.decoded, during: context)
        }
        return AMQPError(.library, "\(context): expected message content, got frame type \(frame.frame_type)")
    }

    /// A basic.return names no delivery tag, only where the message went: the window finds the
    /// publish it is about, and the confirm that follows fails it.
    private func markReturned(exchange: String, routingKey: String, messageID: String?, code: UInt16, text: String) {
        let matched = confirmWindow.markReturned(
            exchange: exchange, routingKey: routingKey, messageID: messageID,
            as: AMQPError(
                .returned,
                "no queue took the mandatory message published to exchange '\(exchange.isEmpty ? "(default)" : exchange)' with routing key '\(routingKey)'",
                replyCode: code, replyText: text))
        if !matched {
            logger.warning("a returned message matched no pending publish", metadata: ["exchange": "\(exchange)", "routing_key": "\(routingKey)"])
        }
    }

    private func connectionLost(_ error: AMQPError) {
        logger.warning("AMQP connection lost; reconnecting", metadata: ["error": "\(error)", "unconfirmed": "\(confirmWindow.count)"])
        configuration.onConnectionEvent?(.lost(error))
        let lost = AMQPError(
            .connectionLost,
            "the connection was lost before the broker confirmed the message (\(error)); publish it again",
            replyCode: error.replyCode, replyText: error.replyText)
        confirmWindow.reset(failing: lost)
        // The node may be gone with the connection: the next attempt goes to the next node.
        lifecycle.lost().markBroken()
        backoff()
    }

    /// Sleeps before the next reconnect attempt, waking early for shutdown. Commands that arrive
    /// meanwhile stay queued: publishes go out on the new connection, settlements of old
    /// deliveries are refused as stale. The delay grows per round over all addresses, so a
    /// cluster with one node down fails over at the shortest delay.
    private func backoff() {
        let delay = configuration.reconnect.delay(attempt: lifecycle.beginBackoff())
        let deadline = ContinuousClock.now + delay
        while ContinuousClock.now < deadline {
            let remaining = Int((deadline - ContinuousClock.now) / .milliseconds(1))
            var fd = pollfd(fd: mailbox.wakeDescriptor, events: Int16(POLLIN), revents: 0)
            // Other commands stay queued for the next connection; a shutdown is taken now.
            guard mailbox.beginWait(for: .shutdown) else {
                if takeShutdownRequests() { return }
                continue
            }
            let ready = poll(&fd, 1, Int32(max(remaining, 1)))
            mailbox.endWait()
            if ready > 0 {
                mailbox.drainWake()
                if takeShutdownRequests() { return }
            }
        }
    }

    /// Moves shutdown requests out of the mailbox while disconnected, keeping everything else queued.
    private func takeShutdownRequests() -> Bool {
        for case .shutdown(let continuation) in mailbox.takeShutdowns() { requestShutdown(continuation) }
        return lifecycle.isShuttingDown
    }

    /// On shutdown: carry out what was queued before it (acks matter most), send what waits, and
    /// give outstanding confirms a bounded time to arrive.
    private func drainBeforeClose() {
        guard let handle = lifecycle.connection else { return }
        do {
            try execute(mailbox.take(), on: handle)
            try cancelConsumers(on: handle)
            let deadline = ContinuousClock.now + configuration.rpcTimeout
            while (!confirmWindow.isEmpty || !waiting.isEmpty) && ContinuousClock.now < deadline {
                try sendWaiting(on: handle)
                wait(for: handle.socketDescriptor, milliseconds: 50)
                try readFrames(on: handle, budget: 4096)
            }
        } catch let error as AMQPError {
            logger.warning("AMQP connection failed while closing", metadata: ["error": "\(error)"])
        } catch {}
    }

    /// Cancels the connection's consumers and waits for the broker's answers before the channel
    /// closes, so acks sent just before take effect. The channel's client of a quorum queue holds
    /// settlements back once a few dozen wait to be applied, and drops those when the channel
    /// closes: the deliveries they acked come back to be handled again (rabbitmq-server#10327).
    /// The broker answers a quorum queue's cancel once the queue has applied it, and so the
    /// settlements sent before it; those held back are then sent, ahead of the close. One deadline
    /// for all of it (`cancelTimeout`): a queue with no leader cannot apply them anyway, and a
    /// worker's grace period is spent on its jobs. A consumer the broker cancelled already is
    /// answered at once. Deliveries that arrive meanwhile are never handed out: unacknowledged,
    /// the broker requeues them when the channel closes.
    private func cancelConsumers(on handle: ConnectionHandle) throws {
        guard let consume else { return }
        let deadline = ContinuousClock.now + configuration.cancelTimeout
        for subscription in consume.subscriptions {
            let left = deadline - ContinuousClock.now
            guard handle.isUsable, left > .zero else { return }
            try handle.cancel(consumerTag: subscription.consumerTag, timeout: left)
        }
    }

    /// Fails everything still pending, ends the delivery stream and closes the connection.
    private func finish(_ error: AMQPError) {
        for command in mailbox.close() {
            if case .shutdown(let continuation) = command {
                requestShutdown(continuation)
            } else {
                Self.refuse(command)
            }
        }
        confirmWindow.reset(failing: error)
        while let pending = waiting.popFirst() { pending.fail(error) }
        deliveries?.end(nil)
        lifecycle.finish()?.close()
        for continuation in shutdownWaiters { continuation.resume() }
        shutdownWaiters.removeAll()
    }

    private func requestShutdown(_ continuation: CheckedContinuation<Void, Never>?) {
        lifecycle.requestShutdown()
        if let continuation { shutdownWaiters.append(continuation) }
    }
}
