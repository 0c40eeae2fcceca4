import AMQP
import Testing

@Suite("AMQP URLs")
struct AMQPConfigurationTests {
    @Test("a plain URL fills in the RabbitMQ defaults")
    func defaults() throws {
        let configuration = try AMQPConfiguration(url: "amqp://localhost")
        #expect(configuration.address.host == "localhost")
        #expect(configuration.address.port == 5672)
        #expect(configuration.address.vhost == "/")
        #expect(configuration.address.user == "guest")
        #expect(configuration.address.password == "guest")
        #expect(configuration.address.tls == nil)
    }

    @Test("credentials, port, vhost and query parameters are read")
    func everything() throws {
        let configuration = try AMQPConfiguration(
            url: "amqps://push%40er:s%3Acret@broker.example:5673/prod%2Fpush?heartbeat=7&connection_timeout=2500&cacertfile=/ca.pem&certfile=/c.pem&keyfile=/k.pem")
        #expect(configuration.address.user == "push@er")
        #expect(configuration.address.password == "s:cret")
        #expect(configuration.address.host == "broker.example")
        #expect(configuration.address.port == 5673)
        #expect(configuration.address.vhost == "prod/push")
        #expect(configuration.heartbeat == .seconds(7))
        #expect(configuration.connectTimeout == .milliseconds(2500))
        #expect(configuration.address.tls == AMQPTLSConfiguration(caFile: "/ca.pem", certificateFile: "/c.pem", keyFile: "/k.pem"))
        #expect(configuration.address.tls?.verifyPeer == true)
        #expect(configuration.redactedURL == "amqps://push@er:***@broker.example:5673/prod%2Fpush")
    }

    @Test("amqps defaults to port 5671 with verification on, and verify_none turns it off")
    func tlsDefaults() throws {
        let verified = try AMQPConfiguration(url: "amqps://h/")
        #expect(verified.address.port == 5671)
        #expect(verified.address.tls?.verifyPeer == true && verified.address.tls?.verifyHostname == true)
        let unverified = try AMQPConfiguration(url: "amqps://h/?verify=verify_none")
        #expect(unverified.address.tls?.verifyPeer == false && unverified.address.tls?.verifyHostname == false)
    }

    @Test(
        "malformed URLs are refused with a message that names the problem",
        arguments: [
            ("", "empty"),
            ("localhost:5672", "missing scheme"),
            ("http://localhost/", "unsupported scheme 'http'"),
            ("amqp:///vhost", "missing host"),
            ("amqp://localhost:99999/", "port 99999 is out of range"),
            ("amqp://localhost/a/b", "contains an unescaped '/'"),
            ("amqp://localhost/?heartbeat=soon", "heartbeat 'soon'"),
            ("amqp://localhost/?connection_timeout=-1", "connection_timeout '-1'"),
            ("amqp://localhost/?frobnicate=1", "unknown query parameter 'frobnicate'"),
            ("amqp://localhost/?cacertfile=/ca.pem", "only meaningful with amqps"),
            ("amqps://localhost/?certfile=/c.pem", "certfile and keyfile must be given together"),
            ("amqps://localhost/?verify=maybe", "verify 'maybe'"),
            ("amqp://user:pw@local host/", "not a well-formed URL"),
        ])
    func malformed(url: String, expected: String) {
        do {
            _ = try AMQPConfiguration(url: url)
            Issue.record("accepted \(url)")
        } catch let error as AMQPError {
            #expect(error.kind == .invalidConfiguration)
            #expect(error.message.contains(expected), "\(error.message)")
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test("a refused URL never repeats its password")
    func passwordNotShown() {
        do {
            _ = try AMQPConfiguration(url: "amqp://user:hunter2@localhost:0x10/")
            Issue.record("accepted")
        } catch {
            #expect(!"\(error)".contains("hunter2"))
            #expect("\(error)".contains("user:***@localhost"))
        }
    }

    @Test("backoff grows geometrically, stays under the cap, and is jittered")
    func backoff() {
        let policy = AMQPReconnectPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(2), multiplier: 2)
        for attempt in 0..<20 {
            let cap = min(0.1 * Double(1 << min(attempt, 30)), 2.0)
            let delay = policy.delay(attempt: attempt)
            #expect(delay >= .milliseconds(Int(cap * 500) - 1) && delay <= .milliseconds(Int(cap * 1000) + 1), "attempt \(attempt): \(delay)")
        }
        let samples = Set((0..<10).map { _ in policy.delay(attempt: 5) })
        #expect(samples.count > 1)
    }

    @Test("a list of URLs: each with its own credentials and TLS, errors naming the URL's place and never the password, shuffled on request")
    func urlList() throws {
        let configuration = try AMQPConfiguration(urls: ["amqp://a:pa@node1:5672/?heartbeat=7", "amqps://b:pb@node2/prod?cacertfile=/ca.pem"])
        #expect(configuration.addresses.map(\.node) == ["node1:5672", "node2:5671"])
        #expect(configuration.addresses[1].user == "b" && configuration.addresses[1].vhost == "prod" && configuration.addresses[1].tls?.caFile == "/ca.pem")
        #expect(configuration.addresses[0].tls == nil)
        #expect(configuration.heartbeat == .seconds(7))
        #expect(configuration.redactedURLs == "amqp://a:***@node1:5672/,amqps://b:***@node2:5671/prod")
        #expect(AMQPConfiguration.urls(inList: " amqp://h1/ , amqp://h2/") == ["amqp://h1/", "amqp://h2/"])
        do {
            _ = try AMQPConfiguration(urls: ["amqp://h1/", "amqp://u:secret@h2:99999/"])
            Issue.record("accepted port 99999")
        } catch let error as AMQPError {
            #expect(error.message.hasPrefix("URL 2 of 2: "), "\(error)")
            #expect(!error.message.contains("secret"))
        }
        #expect(throws: AMQPError.self) { try AMQPConfiguration(urls: []) }
        let many = (1...20).map { "amqp://h\($0)/" }
        let orders = Set((0..<10).map { _ in try! AMQPConfiguration(urls: many, shuffled: true).addresses.map(\.host) })
        #expect(orders.count > 1, "shuffled: a random order per process")
        #expect(try AMQPConfiguration(urls: many).addresses.map(\.host) == many.map { String($0.dropFirst(7).dropLast()) })
    }
}
