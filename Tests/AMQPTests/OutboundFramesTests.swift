@testable import AMQP
import CRabbitMQ
import Foundation
import Synchronization
import Testing

/// The frames `OutboundFrames` encodes must be the bytes librabbitmq would have written for the
/// same call: the library is the reference, read back from the other end of a socket pair.
@Suite("Outbound frames")
struct OutboundFramesTests {
    /// What librabbitmq writes for `call`, on a connection state whose socket is one end of a pair.
    private static func libraryBytes(_ call: (amqp_connection_state_t) -> Int32) throws -> [UInt8] {
        let pair = try Self.socketPair()
        defer { close(pair[1]) }
        let state = try #require(amqp_new_connection())
        defer { amqp_destroy_connection(state) }
        // The state owns the socket, and so pair[0], from here and closes it when destroyed.
        let socket = try #require(amqp_tcp_socket_new(state))
        amqp_tcp_socket_set_sockfd(socket, pair[0])
        #expect(amqp_get_frame_max(state) == Int32(Self.frameMax))
        #expect(call(state) == AMQP_STATUS_OK.rawValue)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let read = chunk.withUnsafeMutableBytes { recv(pair[1], $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            guard read > 0 else { break }
            bytes += chunk[..<read]
        }
        return bytes
    }

    private static func socketPair() throws -> [Int32] {
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        return pair
    }

    /// Reads everything from `socket` until `count` bytes came, a few at a time with pauses: a
    /// broker that reads slowly.
    private static func readSlowly(_ socket: Int32, count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 7000)
        while bytes.count < count {
            let read = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            guard read > 0 else { break }
            bytes += chunk[..<read]
            usleep(200)
        }
        return bytes
    }

    private static func libraryPublish(_ message: AMQPMessage) throws -> [UInt8] {
        try libraryBytes { state in
            CArena.with { arena in
                var properties = arena.properties(message.properties)
                return message.body.withUnsafeBytes { body in
                    amqp_basic_publish(
                        state, 1, arena.bytes(message.exchange), arena.bytes(message.routingKey),
                        message.mandatory ? 1 : 0, 0, &properties,
                        amqp_bytes_t(len: body.count, bytes: UnsafeMutableRawPointer(mutating: body.baseAddress)))
                }
            }
        }
    }

    /// The frame size of a connection state before its login tunes it; a login to RabbitMQ settles
    /// on 128 KiB, and the encoding is the same but for where a body may end.
    static let frameMax = 65_536

    private static func encoded(_ message: AMQPMessage) throws -> [UInt8] {
        var frames = OutboundFrames(frameMax: frameMax)
        try frames.append(publish: message, channel: 1)
        return frames.bytes
    }

    static let everyProperty = AMQPProperties(
        contentType: "application/json", contentEncoding: "identity",
        headers: [
            "string": "héllo", "bytes": .bytes([0, 255]), "bool": true, "i64": .int64(-9_000_000_000),
            "double": .double(-2.25), "decimal": .decimal(decimals: 2, value: 12345), "void": .void,
            "table": .table(["inner": .array([1, "two", .table(["three": 3])])]),
        ],
        persistent: true, priority: 7, correlationID: "corr-1", replyTo: "reply.queue", expiration: "60000",
        messageID: "msg-1", timestamp: 1_700_000_123, type: "result", userID: "guest", appID: "pushworker")

    /// Named cases, so that a failure prints a name rather than a body of 128 KiB.
    static let messages: [String: AMQPMessage] = [
        "no properties, empty body": AMQPMessage(routingKey: "q", body: []),
        "exchange, mandatory": AMQPMessage(exchange: "push", routingKey: "jobs", body: Array("{}".utf8), mandatory: true),
        "every property and headers": AMQPMessage.toQueue("reply-é", body: Array(repeating: 7, count: 1000), properties: everyProperty),
        "persistent false, timestamp 0": AMQPMessage.toQueue("r", body: [1], properties: AMQPProperties(persistent: false, timestamp: 0, type: "summary")),
        "empty headers, body of a whole frame": AMQPMessage.toQueue("r", body: Array(repeating: 9, count: frameMax - 8), properties: AMQPProperties(headers: [:])),
    ]

    @Test("a publish is encoded as librabbitmq encodes it, with any properties and body size up to one frame", arguments: messages.keys.sorted())
    func publishMatchesLibrary(name: String) throws {
        let message = try #require(Self.messages[name])
        let ours = try Self.encoded(message)
        let library = try Self.libraryPublish(message)
        #expect(ours.count == library.count)
        #expect(ours == library, "first difference at byte \(ours.indices.first { $0 >= library.count || ours[$0] != library[$0] } ?? ours.count)")
    }

    @Test("acks, nacks and rejects are encoded as librabbitmq encodes them")
    func settlementsMatchLibrary() throws {
        var frames = OutboundFrames(frameMax: 131_072)
        frames.append(.ack(multiple: true), tag: 1 << 40 | 5, channel: 1)
        frames.append(.ack(multiple: false), tag: 6, channel: 1)
        frames.append(.nack(multiple: true, requeue: true), tag: 7, channel: 1)
        frames.append(.nack(multiple: false, requeue: false), tag: 8, channel: 1)
        frames.append(.reject(requeue: true), tag: 9, channel: 1)
        frames.append(.reject(requeue: false), tag: 10, channel: 1)
        let library = try Self.libraryBytes { state in
            let statuses = [
                amqp_basic_ack(state, 1, 1 << 40 | 5, 1), amqp_basic_ack(state, 1, 6, 0),
                amqp_basic_nack(state, 1, 7, 1, 1), amqp_basic_nack(state, 1, 8, 0, 0),
                amqp_basic_reject(state, 1, 9, 1), amqp_basic_reject(state, 1, 10, 0),
            ]
            return statuses.first { $0 != AMQP_STATUS_OK.rawValue } ?? AMQP_STATUS_OK.rawValue
        }
        #expect(frames.bytes == library)
    }

    @Test("a field longer than AMQP allows is refused by name, and what was buffered before it stays whole")
    func tooLong() throws {
        var frames = OutboundFrames(frameMax: 131_072)
        let good = AMQPMessage.toQueue("q", body: [1, 2, 3])
        try frames.append(publish: good, channel: 1)
        let before = frames.bytes
        let long = String(repeating: "k", count: 256)
        for (message, field) in [
            (AMQPMessage.toQueue(long, body: [1]), "routing key"),
            (AMQPMessage(exchange: long, routingKey: "q", body: [1]), "exchange"),
            (AMQPMessage.toQueue("q", body: [1], properties: AMQPProperties(correlationID: long)), "correlation_id"),
        ] {
            let error = try #require(throws: OutboundFrames.EncodingError.self) { try frames.append(publish: message, channel: 1) }
            #expect(error.message == "its \(field) is 256 bytes long; AMQP allows at most 255")
            #expect(frames.bytes == before)
        }
        #expect(try Self.encoded(good) == before)
    }

    @Test("only a body that fits one frame is taken; a larger one is left to the library")
    func largestBody() {
        let frames = OutboundFrames(frameMax: 4096)
        #expect(frames.fits(.toQueue("q", body: Array(repeating: 0, count: 4088))))
        #expect(!frames.fits(.toQueue("q", body: Array(repeating: 0, count: 4089))))
    }

    /// Many publishes, written to a socket with a small send buffer that the other end reads
    /// slowly: the write goes on through every partial write and full buffer.
    static func buffered(_ count: Int) throws -> OutboundFrames {
        var frames = OutboundFrames(frameMax: 131_072)
        for index in 0..<count {
            try frames.append(publish: .toQueue("q", body: Array(repeating: UInt8(index % 251), count: 1000)), channel: 1)
        }
        return frames
    }

    @Test("a write through a full socket, a piece at a time, delivers every byte in order")
    func partialWrites() throws {
        let pair = try Self.socketPair()
        defer { close(pair[0]); close(pair[1]) }
        var size: Int32 = 4096
        setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var frames = try Self.buffered(1000)
        let expected = frames.bytes
        let received = Mutex<[UInt8]>([])
        let reader = Thread { received.withLock { $0 = Self.readSlowly(pair[1], count: expected.count) } }
        reader.start()
        try frames.write(to: pair[0], stall: .seconds(30))
        #expect(frames.isEmpty)
        shutdown(pair[0], Int32(SHUT_WR))
        while reader.isExecuting || !reader.isFinished { usleep(1000) }
        #expect(received.withLock { $0 } == expected)
    }

    @Test("a write that can put nothing out while nothing comes back fails after the stall; one that hears from the peer waits")
    func stall() throws {
        let pair = try Self.socketPair()
        defer { close(pair[0]); close(pair[1]) }
        var frames = try Self.buffered(3000)
        let error = try #require(throws: AMQPError.self) { try frames.write(to: pair[0], stall: .milliseconds(300)) }
        #expect(error.kind == .connectionLost)
        #expect(error.message.contains("nothing could be written to the broker, and nothing came from it"))

        // The same, but the peer says something every 100 ms (as a broker's heartbeats do) for
        // three seconds, then reads: the write waits it out. The stall is 2 s there, so that a
        // beat delayed by a loaded machine is not taken for silence.
        let other = try Self.socketPair()
        defer { close(other[0]); close(other[1]) }
        frames = try Self.buffered(3000)
        let expected = frames.bytes.count
        let received = Mutex(0)
        let peer = Thread {
            for _ in 0..<30 {
                var beat: UInt8 = 8
                _ = send(other[1], &beat, 1, 0)
                usleep(100_000)
            }
            let bytes = Self.readSlowly(other[1], count: expected)
            received.withLock { $0 = bytes.count }
        }
        peer.start()
        try frames.write(to: other[0], stall: .seconds(2))
        shutdown(other[0], Int32(SHUT_WR))
        while peer.isExecuting || !peer.isFinished { usleep(1000) }
        #expect(received.withLock { $0 } == expected)
    }

    @Test("headers larger than a frame are refused by size, before anything is buffered")
    func headersTooLarge() throws {
        var frames = OutboundFrames(frameMax: 4096)
        let message = AMQPMessage.toQueue("q", body: [1], properties: AMQPProperties(headers: ["big": .string(String(repeating: "h", count: 5000))]))
        let error = try #require(throws: OutboundFrames.EncodingError.self) { try frames.append(publish: message, channel: 1) }
        #expect(error.message.contains("a frame of this connection holds at most 4088") || error.message.contains("more than the 4088 bytes"))
        #expect(frames.isEmpty)
        #expect(throws: OutboundFrames.EncodingError.self) { try frames.check(message) }
    }
}
