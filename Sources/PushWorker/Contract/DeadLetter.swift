import AMQP
import Foundation

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
        return seconds.map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double($0))) } ?? "-"
    }

    /// How often the broker delivered the job before it was dead-lettered.
    public var deliveries: Int64 {
        delivery.deaths.compactMap { $0["count"]?.intValue }.reduce(0, +) + (delivery.properties.headers?["x-delivery-count"]?.intValue ?? 0)
    }

    public var replays: Int { Int(delivery.properties.headers?[WireHeader.replays]?.intValue ?? 0) }

    /// What `dlq list --json` prints for it.
    public var listing: Listing {
        Listing(id: id, error: errorCode, message: errorMessage, time: time, deliveries: deliveries, replays: replays)
    }

    public struct Listing: Codable, Sendable, Hashable {
        public var id: String
        public var error: String
        public var message: String
        public var time: String
        public var deliveries: Int64
        public var replays: Int
    }

    /// The message that puts it back on `queue`: body and headers as they are, its replays
    /// counted up, so a job that keeps coming back shows it.
    public func replay(to queue: String) -> AMQPMessage {
        var properties = delivery.properties
        var headers = properties.headers ?? [:]
        headers[WireHeader.replays] = .int64(Int64(replays + 1))
        properties.headers = headers
        return .toQueue(queue, body: delivery.body, properties: properties)
    }

    /// The dead letter the worker publishes for a job it refuses: the job as it came, its headers
    /// kept, with the reason added.
    static func properties(refusing properties: AMQPProperties, _ error: JobError) -> AMQPProperties {
        Self.properties(refusing: properties, code: error.code.rawValue, field: error.field, message: error.message)
    }

    /// The same for any refused message (a registry command).
    static func properties(refusing properties: AMQPProperties, code: String, field: String?, message: String) -> AMQPProperties {
        var properties = properties
        var headers = properties.headers ?? [:]
        headers[WireHeader.error] = .string(code)
        headers[WireHeader.errorMessage] = .string(message)
        if let field { headers[WireHeader.errorField] = .string(field) }
        properties.headers = headers
        properties.persistent = true
        return properties
    }
}
