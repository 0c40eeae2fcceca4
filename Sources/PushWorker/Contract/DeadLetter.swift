import AMQP
import Foundation
import Stores

/// A dead letter as operators see it: why it is there, since when, how often it was tried.
public struct DeadLetter: Sendable {
    public let delivery: AMQPDelivery

    public init(delivery: AMQPDelivery) {
        self.delivery = delivery
    }

    public var id: String { delivery.properties.messageID ?? "(no id)" }

    /// The worker's code, or the broker's reason (delivery_limit, rejected, expired) for poison.
    public var errorCode: String {
        delivery.properties.headers?[WireHeader.error]?.stringValue
            ?? delivery.deaths.first?["reason"]?.stringValue ?? "unknown"
    }

    public var errorMessage: String {
        delivery.properties.headers?[WireHeader.errorMessage]?.stringValue ?? ""
    }

    public var time: String {
        let seconds: UInt64? = delivery.properties.timestamp
            ?? { if case .timestamp(let value)? = delivery.deaths.first?["time"] { return value } else { return nil } }()
        return seconds.map { RFC3339.string(Date(timeIntervalSince1970: Double($0))) } ?? "-"
    }

    /// How often the broker delivered the job before it was dead-lettered.
    public var deliveries: Int64 {
        delivery.deaths.compactMap { $0["count"]?.intValue }.reduce(0, +) + (delivery.properties.headers?["x-delivery-count"]?.intValue ?? 0)
    }

    public var replays: Int { Int(delivery.properties.headers?[WireHeader.replays]?.intValue ?? 0) }

    /// The queue it died in: named by the worker when it refused it, else by the broker's latest
    /// `x-death` entry (delivery limit, a rejected streamed job); nil for a message that came
    /// some other way.
    public var sourceQueue: String? {
        let headers = delivery.properties.headers
        guard headers?[WireHeader.error] != nil else { return delivery.deaths.first?["queue"]?.stringValue }
        // The worker refused it; before x-pushworker-queue existed it published the dead letter
        // with the source queue as its routing key.
        return headers?[WireHeader.queue]?.stringValue ?? (delivery.routingKey.isEmpty ? nil : delivery.routingKey)
    }

    /// The reason of its first death, when it was replayed and died again; nil otherwise.
    public var firstErrorCode: String? {
        delivery.properties.headers?[WireHeader.firstError]?.stringValue
    }

    /// What `dlq list --json` prints for it.
    public var listing: Listing {
        Listing(
            id: id, error: errorCode, message: errorMessage, time: time, deliveries: deliveries, replays: replays,
            queue: sourceQueue, firstError: firstErrorCode)
    }

    public struct Listing: Codable, Sendable, Hashable {
        public var id: String
        public var error: String
        public var message: String
        public var time: String
        public var deliveries: Int64
        public var replays: Int
        /// The queue it died in, where `dlq replay` sends it.
        public var queue: String?
        /// The first reason, when it was replayed and died again.
        public var firstError: String?

        enum CodingKeys: String, CodingKey {
            case id, error, message, time, deliveries, replays, queue
            case firstError = "first_error"
        }
    }

    /// The message that puts it back on `queue`: body and headers as they are, its replays
    /// counted up, so a job that keeps coming back shows it. The reason it died for moves to the
    /// first-error headers (unless an earlier death is there already) and leaves the latest
    /// ones, so that whatever ends it next, the worker or the broker, is what `dlq` shows.
    public func replay(to queue: String) -> AMQPMessage {
        var properties = delivery.properties
        var headers = properties.headers ?? [:]
        if headers[WireHeader.firstError] == nil {
            headers[WireHeader.firstError] = .string(errorCode)
            headers[WireHeader.firstErrorMessage] = .string(errorMessage)
        }
        for name in [WireHeader.error, WireHeader.errorMessage, WireHeader.errorField, WireHeader.queue] { headers[name] = nil }
        // The broker's record of the old death would be read as the new one's.
        for name in WireHeader.brokerBookkeeping.union(WireHeader.brokerDeathSummary) { headers[name] = nil }
        headers[WireHeader.replays] = .int64(Int64(replays + 1))
        properties.headers = headers
        return .toQueue(queue, body: delivery.body, properties: properties)
    }

    /// Refuses a message to the dead letters: its body as it came (or as it may be kept), its
    /// headers kept, with the reason and the queue it came from (where a replay sends it) added;
    /// returns once the broker has it. The one way a job or a registry command is refused.
    static func publish(
        _ body: [UInt8], refusing properties: AMQPProperties, from queue: String, code: String, field: String?, message: String,
        exchange: String, via publisher: any MessagePublishing
    ) async throws {
        try await publisher.publish(AMQPMessage(
            exchange: exchange, routingKey: queue, body: body,
            properties: Self.properties(refusing: properties, from: queue, code: code, field: field, message: message), mandatory: true))
    }

    /// A refused message's properties: the reason and the queue in its headers.
    static func properties(refusing properties: AMQPProperties, from queue: String, code: String, field: String?, message: String) -> AMQPProperties {
        var properties = properties
        var headers = properties.headers ?? [:]
        headers[WireHeader.error] = .string(code)
        headers[WireHeader.errorMessage] = .string(message)
        headers[WireHeader.errorField] = field.map { .string($0) }
        headers[WireHeader.queue] = .string(queue)
        properties.headers = headers
        properties.persistent = true
        return properties
    }
}
