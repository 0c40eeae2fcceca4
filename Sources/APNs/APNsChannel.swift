import Foundation

/// A broadcast channel as the channel management API describes it.
public struct APNsChannel: Sendable, Hashable {
    /// The base64 channel id APNs assigned (`apns-channel-id`).
    public var id: String
    /// Known when APNs said it (reading one channel), nil otherwise.
    public var storagePolicy: APNsChannelStoragePolicy?
    /// The `apns-request-id` APNs answered with, for Apple's support.
    public var requestID: String?

    public init(id: String, storagePolicy: APNsChannelStoragePolicy? = nil, requestID: String? = nil) {
        self.id = id
        self.storagePolicy = storagePolicy
        self.requestID = requestID
    }

    /// The longest channel id accepted, in bytes of its base64 text. Apple documents no figure,
    /// only that a longer id is refused (BadChannelId); the ids APNs hands out are 24 characters
    /// (16 bytes), so 128 leaves room without letting a pasted document through.
    public static let maximumIDBytes = 128

    /// Checks what APNs checks of an `apns-channel-id` (BadChannelId: not properly base64, or too
    /// long), so a typo is refused here with a sentence rather than after a round trip.
    public static func validate(id: String) throws(APNsValidationError) {
        guard !id.isEmpty else { throw APNsValidationError(field: "channel", "channel id is empty") }
        guard id.utf8.count <= maximumIDBytes else {
            throw APNsValidationError(field: "channel", "channel id is \(id.utf8.count) bytes; at most \(maximumIDBytes) are accepted")
        }
        guard isBase64(id) else {
            throw APNsValidationError(field: "channel", "channel id '\(id)' is not standard base64 (A-Z a-z 0-9 + /, padded with =)")
        }
    }

    /// Standard alphabet, a multiple of 4 characters, `=` only as the last one or two.
    static func isBase64(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count % 4 == 0 else { return false }
        let padding = bytes.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return false }
        return bytes.dropLast(padding).allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "+"), UInt8(ascii: "/"):
                true
            default: false
            }
        }
    }
}

extension APNsChannel {
    /// Channels belong to an app's bundle id; a configured topic may carry a push type's suffix
    /// (`.push-type.liveactivity`), which this drops.
    public static func bundleID(ofTopic topic: String) -> String {
        let suffix = APNsPushType.liveactivity.requiredTopicSuffix ?? ""
        return topic.hasSuffix(suffix) ? String(topic.dropLast(suffix.count)) : topic
    }
}
