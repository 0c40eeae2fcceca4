import Foundation

/// One notification to one device: everything that goes into `POST /3/device/<token>` except the
/// credentials, which belong to the connection.
public struct APNsRequest: Sendable, Hashable {
    public var deviceToken: String
    /// `apns-topic`: the app's bundle id, with the suffix its push type needs.
    public var topic: String
    public var pushType: APNsPushType
    /// `nil` sends the push type's default (10, or 5 for background).
    public var priority: APNsPriority?
    public var expiration: APNsExpiration?
    /// `apns-collapse-id`: at most 64 bytes.
    public var collapseID: String?
    /// `apns-id`: APNs generates one when absent.
    public var apnsID: UUID?
    /// The complete JSON payload, sent as given.
    public var payload: [UInt8]

    public init(
        deviceToken: String, topic: String, pushType: APNsPushType = .alert, priority: APNsPriority? = nil,
        expiration: APNsExpiration? = nil, collapseID: String? = nil, apnsID: UUID? = nil, payload: [UInt8]
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = payload
    }

    public static let maximumCollapseIDBytes = 64

    /// Checks every rule APNs would reject the request for, so a bad request is refused here with
    /// a sentence naming the field instead of costing a round trip and a cryptic reason.
    public func validate() throws(APNsValidationError) {
        try APNsDeviceToken.validate(deviceToken)
        try validateNotification()
    }

    /// Every rule but the device token's: what a job is checked against once, before it is
    /// known which devices it reaches.
    public func validateNotification() throws(APNsValidationError) {
        guard !topic.isEmpty else { throw APNsValidationError(field: "topic", "topic is empty") }
        if let suffix = pushType.requiredTopicSuffix, !topic.hasSuffix(suffix) {
            throw APNsValidationError(field: "topic", "push type \(pushType.rawValue) needs a topic ending in '\(suffix)', got '\(topic)'")
        }
        if pushType == .background && priority == .immediate {
            throw APNsValidationError(field: "priority", "background pushes must use priority 5 or 1; APNs rejects priority 10")
        }
        if let collapseID, collapseID.utf8.count > Self.maximumCollapseIDBytes {
            throw APNsValidationError(field: "collapse_id", "collapse_id is \(collapseID.utf8.count) bytes; APNs allows at most \(Self.maximumCollapseIDBytes)")
        }
        guard !payload.isEmpty else { throw APNsValidationError(field: "payload", "payload is empty") }
        if payload.count > pushType.payloadLimit {
            throw APNsValidationError(
                field: "payload",
                "payload is \(payload.count) bytes; APNs allows at most \(pushType.payloadLimit) for push type \(pushType.rawValue)")
        }
    }

    public var effectivePriority: APNsPriority { priority ?? pushType.defaultPriority }

    /// `/3/device/<token>`
    public var path: String { "/3/device/\(deviceToken)" }

    /// The APNs headers, in the order sent. Authorization is the connection's business.
    public var headers: [(name: String, value: String)] {
        var headers: [(String, String)] = []
        // Room for every header and the authorization the client adds: one allocation per request.
        headers.reserveCapacity(7)
        headers.append(("apns-topic", topic))
        headers.append(("apns-push-type", pushType.rawValue))
        headers.append(("apns-priority", effectivePriority == .immediate ? "10" : String(effectivePriority.rawValue)))
        if let expiration { headers.append(("apns-expiration", expiration.headerValue)) }
        if let collapseID { headers.append(("apns-collapse-id", collapseID)) }
        if let apnsID { headers.append(("apns-id", apnsID.uuidString.lowercased())) }
        return headers
    }
}
