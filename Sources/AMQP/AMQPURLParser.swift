import Foundation

/// Turns a RabbitMQ-style URI into a configuration, with an error that says exactly what is wrong.
enum AMQPURLParser {
    static func parse(_ url: String) throws -> AMQPConfiguration {
        let shown = redact(url)
        func fail(_ problem: String) -> AMQPError {
            AMQPError(.invalidConfiguration, "invalid AMQP URL '\(shown)': \(problem)")
        }
        guard !url.isEmpty else { throw AMQPError(.invalidConfiguration, "invalid AMQP URL: it is empty") }
        guard let schemeEnd = url.range(of: "://") else {
            throw fail("missing scheme; expected it to start with amqp:// or amqps://")
        }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "amqp" || scheme == "amqps" else {
            throw fail("unsupported scheme '\(scheme)'; expected amqp or amqps")
        }
        guard let components = URLComponents(string: url) else {
            throw fail("it is not a well-formed URL (check for spaces or unescaped characters)")
        }
        guard let host = components.host, !host.isEmpty else {
            throw fail("missing host")
        }
        var port: Int? = nil
        if let p = components.port {
            guard (1...65535).contains(p) else { throw fail("port \(p) is out of range 1-65535") }
            port = p
        } else if url[schemeEnd.upperBound...].split(separator: "/", maxSplits: 1).first?.hasSuffix(":") == true {
            throw fail("port is empty after ':'")
        }
        var tls: AMQPTLSConfiguration? = scheme == "amqps" ? AMQPTLSConfiguration() : nil
        let user = components.user.map { $0.removingPercentEncoding ?? $0 } ?? "guest"
        let password = components.password.map { $0.removingPercentEncoding ?? $0 } ?? "guest"

        // RabbitMQ URI spec: an absent or empty path is the default vhost "/"; otherwise the
        // path minus its leading slash, percent-decoded ("%2f" is "/").
        var vhost = "/"
        let rawPath = components.percentEncodedPath
        if rawPath.count > 1 {
            let encoded = String(rawPath.dropFirst())
            guard !encoded.contains("/") else {
                throw fail("vhost '\(encoded)' contains an unescaped '/'; write it as %2F")
            }
            guard let decoded = encoded.removingPercentEncoding else {
                throw fail("vhost '\(encoded)' has invalid percent-encoding")
            }
            vhost = decoded
        }

        var config = AMQPConfiguration(host: host, port: port, vhost: vhost, user: user, password: password, tls: tls)
        for item in components.queryItems ?? [] {
            let value = item.value ?? ""
            switch item.name {
            case "heartbeat":
                guard let seconds = Int(value), (0...65535).contains(seconds) else {
                    throw fail("heartbeat '\(value)' must be a whole number of seconds between 0 and 65535")
                }
                config.heartbeat = .seconds(seconds)
            case "connection_timeout":
                guard let ms = Int(value), ms > 0 else {
                    throw fail("connection_timeout '\(value)' must be a positive number of milliseconds")
                }
                config.connectTimeout = .milliseconds(ms)
            case "cacertfile", "certfile", "keyfile", "verify":
                guard tls != nil else { throw fail("'\(item.name)' is only meaningful with amqps://") }
                switch item.name {
                case "cacertfile": tls?.caFile = value
                case "certfile": tls?.certificateFile = value
                case "keyfile": tls?.keyFile = value
                default:
                    switch value {
                    case "verify_peer": tls?.verifyPeer = true; tls?.verifyHostname = true
                    case "verify_none": tls?.verifyPeer = false; tls?.verifyHostname = false
                    default: throw fail("verify '\(value)' must be verify_peer or verify_none")
                    }
                }
            default:
                throw fail("unknown query parameter '\(item.name)'; known: heartbeat, connection_timeout, cacertfile, certfile, keyfile, verify")
            }
        }
        if let tlsConfig = tls, (tlsConfig.certificateFile == nil) != (tlsConfig.keyFile == nil) {
            throw fail("certfile and keyfile must be given together")
        }
        config.address.tls = tls
        return config
    }

    /// Masks the password of a URL that may not even parse, so no error message can leak it.
    static func redact(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard let at = authority.lastIndex(of: "@") else { return url }
        let userInfo = authority[..<at]
        guard let colon = userInfo.firstIndex(of: ":") else { return url }
        return String(url[..<colon]) + ":***" + String(url[at...])
    }
}
