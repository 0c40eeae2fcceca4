import CRabbitMQ
import Foundation

/// librabbitmq's status codes, turned into errors of the right kind with the library's words.
enum AMQPStatus {
    static func text(_ status: Int32) -> String {
        String(cString: amqp_error_string2(status))
    }

    static func error(_ status: Int32, during context: String, default kind: AMQPError.Kind, timeout: Duration? = nil) -> AMQPError {
        // errno is not reliable here: librabbitmq connects without blocking and reads the real
        // cause with SO_ERROR, leaving errno at EINPROGRESS. So say only what librabbitmq says.
        var detail = text(status)
        let resolved: AMQPError.Kind
        switch status {
        case AMQP_STATUS_TIMEOUT.rawValue:
            resolved = .timeout
            if let timeout { detail += " after \(Int((timeout / .milliseconds(1)).rounded())) ms" }
        case AMQP_STATUS_SSL_ERROR.rawValue, AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED.rawValue,
            AMQP_STATUS_SSL_PEER_VERIFY_FAILED.rawValue, AMQP_STATUS_SSL_CONNECTION_FAILED.rawValue:
            resolved = .tls
        case AMQP_STATUS_HEARTBEAT_TIMEOUT.rawValue, AMQP_STATUS_CONNECTION_CLOSED.rawValue,
            AMQP_STATUS_SOCKET_CLOSED.rawValue:
            resolved = kind == .connectionFailed ? .connectionFailed : .connectionLost
        default:
            resolved = kind
        }
        return AMQPError(resolved, "\(context): \(detail)")
    }
}
