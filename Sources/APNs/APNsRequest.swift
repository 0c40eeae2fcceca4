import Foundation

/// One notification to one device, or one Live Activity broadcast to a channel's subscribers:
/// everything that goes into `POST /3/device/<token>` (or `POST /4/broadcasts/apps/<bundle id>`)
/// except the credentials, which belong to the connection.
///
/// A broadcast is the same type rather than one of its own so that it goes through the same
/// client, pool, retries and batches as device pushes (APNs serves both on the same hosts and
/// connections); `channelID` is what tells them apart.
public struct APNsRequest: Sendable, Hashable {
    /// Empty for a broadcast.
    public var deviceToken: String
    /// `apns-topic`: the app's bundle id, with the suffix its push type needs. For a broadcast,
    /// the bundle id that goes into the path (a `.push-type.liveactivity` suffix is dropped
    /// there, so the device spelling works too); no `apns-topic` header is sent.
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
    /// `apns-channel-id` (base64, as `APNsChannelManager.create` returned it): set, the request
    /// is a broadcast to the channel's subscribers.
    public var channelID: String?
    /// `apns-request-id`, broadcasts only (APNs echoes it, or makes one, in the answer); a device
    /// request ignores it.
    public var requestID: UUID?

    public init(
        deviceToken: String, topic: String, pushType: APNsPushType = .alert, priority: APNsPriority? = nil,
        expiration: APNsExpiration? = nil, collapseID: String? = nil, apnsID: UUID? = nil, payload: [UInt8],
        channelID: String? = nil, requestID: UUID? = nil
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = payload
        self.channelID = channelID
        self.requestID = requestID
    }

    public static let maximumCollapseIDBytes = 64
    /// The largest broadcast payload APNs accepts (a device's Live Activity payload stays at 4096).
    public static let broadcastPayloadLimit = 5120
    /// The topic suffix a Live Activity device push needs, dropped from a broadcast's path.
    static let liveActivitySuffix = ".push-type.liveactivity"

    /// Whether this is a broadcast to a channel rather than a push to one device.
    public var isBroadcast: Bool { channelID != nil }

    /// The bundle id a broadcast's path names: `topic` without `.push-type.liveactivity`.
    public var bundleID: String {
        topic.hasSuffix(Self.liveActivitySuffix) ? String(topic.dropLast(Self.liveActivitySuffix.utf8.count)) : topic
    }

    /// Checks every rule APNs would reject the request for, so a bad request is refused here with
    /// a sentence naming the field instead of costing a round trip and a cryptic reason.
    public func validate() throws(APNsValidationError) {
        if !isBroadcast { try APNsDeviceToken.validate(deviceToken) }
        try validateNotification()
    }

    /// Every rule but the device token's: what a job is checked against once, before it is
    /// known which devices it reaches. A broadcast is checked against the broadcast rules.
    public func validateNotification() throws(APNsValidationError) {
        if let channelID {
            try validateBroadcast(channelID: channelID)
            return
        }
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

    /// The broadcast rules: APNs answers BadChannelId, InvalidPushType, BadPriority or
    /// PayloadTooLarge otherwise, and a collapse id means nothing to a channel.
    private func validateBroadcast(channelID: String) throws(APNsValidationError) {
        try APNsChannel.validate(id: channelID)
        guard !bundleID.isEmpty else { throw APNsValidationError(field: "topic", "topic (the app's bundle id) is empty") }
        guard pushType == .liveactivity else {
            throw APNsValidationError(field: "push_type", "broadcasts must use push type liveactivity, got \(pushType.rawValue)")
        }
        if let priority, priority == .low {
            throw APNsValidationError(field: "priority", "broadcasts must use priority 10 or 5; APNs rejects priority 1")
        }
        if collapseID != nil {
            throw APNsValidationError(field: "collapse_id", "broadcasts take no collapse_id")
        }
        guard !payload.isEmpty else { throw APNsValidationError(field: "payload", "payload is empty") }
        if payload.count > Self.broadcastPayloadLimit {
            throw APNsValidationError(
                field: "payload", "payload is \(payload.count) bytes; APNs allows at most \(Self.broadcastPayloadLimit) for a broadcast")
        }
    }

    public var effectivePriority: APNsPriority { priority ?? pushType.defaultPriority }

    /// `/3/device/<token>`, or `/4/broadcasts/apps/<bundle id>` for a broadcast.
    public var path: String { isBroadcast ? "/4/broadcasts/apps/\(bundleID)" : "/3/device/\(deviceToken)" }

    /// The APNs headers, in the order sent. Authorization is the connection's business.
    public var headers: [(name: String, value: String)] {
        if let channelID { return broadcastHeaders(channelID: channelID) }
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

    /// A broadcast's: no `apns-topic` (the bundle id is in the path), no collapse id.
    private func broadcastHeaders(channelID: String) -> [(name: String, value: String)] {
        var headers: [(String, String)] = []
        headers.reserveCapacity(6)
        headers.append(("apns-channel-id", channelID))
        headers.append(("apns-push-type", APNsPushType.liveactivity.rawValue))
        headers.append(("apns-priority", String(effectivePriority.rawValue)))
        if let expiration { headers.append(("apns-expiration", expiration.headerValue)) }
        if let requestID { headers.append(("apns-request-id", requestID.uuidString.lowercased())) }
        return headers
    }
}
