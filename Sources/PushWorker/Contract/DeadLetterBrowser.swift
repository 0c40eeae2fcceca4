import AMQP
import Foundation

/// A dead letter as the dlq commands see it.
struct DeadLetter {
    let delivery: AMQPDelivery

    var id: String { delivery.properties.messageID ?? "(no id)" }

    /// The worker's code, or the broker's reason (delivery_limit, rejected, expired) for poison.
    var errorCode: String {
        delivery.properties.headers?["x-pushworker-error"]?.stringValue
            ?? delivery.deaths.first?["reason"]?.stringValue ?? "unknown"
    }

    var errorMessage: String {
        delivery.properties.headers?["x-pushworker-error-message"]?.stringValue ?? ""
    }

    var time: String {
        let seconds: UInt64? = delivery.properties.timestamp
            ?? { if case .timestamp(let value)? = delivery.deaths.first?["time"] { return value } else { return nil } }()
        return seconds.map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double($0))) } ?? "-"
    }

    /// How often the broker delivered the job before it was dead-lettered.
    var deliveries: Int64 {
        delivery.deaths.compactMap { $0["count"]?.intValue }.reduce(0, +) + (delivery.properties.headers?["x-delivery-count"]?.intValue ?? 0)
    }

    var replays: Int { Int(delivery.properties.headers?["x-pushworker-replays"]?.intValue ?? 0) }

    var summary: [String: Any] {
        ["id": id, "error": errorCode, "message": errorMessage, "time": time, "deliveries": deliveries, "replays": replays]
    }
}

/// Reads every dead letter without removing it: consume until the queue is quiet, let `body`
/// choose the ones to acknowledge (remove), then close; the broker puts the rest back.
enum DeadLetterBrowser {
    static func browse(
        _ configuration: AMQPConfiguration, queue: String, quiet: Duration = .milliseconds(700),
        _ body: ([DeadLetter]) async throws -> [DeadLetter]
    ) async throws {
        let consumer = try await AMQPConsumer.connect(configuration, queue: queue, prefetch: 1000)
        var letters: [DeadLetter] = []
        while true {
            guard let delivery = try await consumer.next(idle: quiet) else { break }
            letters.append(DeadLetter(delivery: delivery))
        }
        do {
            for letter in try await body(letters) { try await letter.delivery.ack() }
        } catch {
            await consumer.close()
            throw error
        }
        await consumer.close()
    }
}
