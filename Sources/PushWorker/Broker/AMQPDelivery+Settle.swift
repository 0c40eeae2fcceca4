import AMQP
import Logging

extension AMQPDelivery {
    /// Settles a job or a registry command as decided, and says so when it cannot: a stale
    /// delivery (its connection was replaced) is delivered again by the broker, which the
    /// operator should see once in the log rather than never, unless it was to go back anyway.
    /// - Parameter kind: what the message is, for the log line ("job", "registry command").
    func settle(_ settlement: JobSettlement, kind: String, logger: Logger) async {
        do {
            switch settlement {
            case .acknowledge: try await ack()
            case .requeue: try await nack(requeue: true)
            case .reject: try await reject(requeue: false)
            }
        } catch {
            // A requeue of a delivery whose connection went is what the broker does by itself:
            // nothing the operator needs to act on.
            if settlement == .requeue && !isCurrent {
                logger.debug("\(kind) returned with its connection", metadata: ["id": "\(properties.messageID ?? "unknown")"])
                return
            }
            logger.warning("cannot settle the \(kind); the broker will deliver it again", metadata: [
                "id": "\(properties.messageID ?? "unknown")", "settlement": "\(settlement)", "error": "\(error)",
            ])
        }
    }
}
