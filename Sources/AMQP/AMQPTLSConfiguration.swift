/// TLS settings for `amqps://`. Verification is on unless explicitly turned off, because a push
/// worker's broker credentials are worth stealing.
public struct AMQPTLSConfiguration: Sendable, Hashable {
    /// PEM file of the certificate authorities to trust; `nil` uses OpenSSL's default store.
    public var caFile: String?
    /// PEM client certificate and its key, for brokers that authenticate clients by certificate.
    public var certificateFile: String?
    public var keyFile: String?
    public var verifyPeer: Bool
    public var verifyHostname: Bool

    public init(
        caFile: String? = nil,
        certificateFile: String? = nil,
        keyFile: String? = nil,
        verifyPeer: Bool = true,
        verifyHostname: Bool = true
    ) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.verifyPeer = verifyPeer
        self.verifyHostname = verifyHostname
    }
}
