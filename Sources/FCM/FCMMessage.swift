import Foundation

/// One notification for Android devices, as FCM HTTP v1's `message` without its `token`: what a
/// job's `notification`, `fcm`, `expiration`, `priority` and `collapse_id` become. Checked as it is
/// made against FCM's rules, so a job FCM would refuse for every device is refused before any
/// device is sent, naming the field.
public struct FCMMessage: Sendable, Hashable {
    public struct Notification: Sendable, Hashable {
        public var title: String?
        public var body: String?
        public var image: String?

        public init(title: String? = nil, body: String? = nil, image: String? = nil) {
            self.title = title
            self.body = body
            self.image = image
        }
    }

    public enum Priority: String, Sendable, Hashable {
        case high, normal
    }

    public var notification: Notification?
    /// FCM's `data`: string to string.
    public var data: [String: String]
    public var priority: Priority?
    /// Seconds FCM keeps the message for an offline device (`android.ttl`); 0 is now or never.
    public var ttl: Int?
    public var collapseKey: String?
    /// `android.notification.channel_id`.
    public var channelID: String?
    public var directBootOK: Bool?

    public init(
        notification: Notification? = nil, data: [String: String] = [:], priority: Priority? = nil, ttl: Int? = nil, collapseKey: String? = nil,
        channelID: String? = nil, directBootOK: Bool? = nil
    ) {
        self.notification = notification
        self.data = data
        self.priority = priority
        self.ttl = ttl
        self.collapseKey = collapseKey
        self.channelID = channelID
        self.directBootOK = directBootOK
    }

    /// FCM's limit on a message's payload (its notification and data), in bytes.
    public static let maximumPayload = 4096
    /// FCM's longest `ttl`: four weeks.
    public static let maximumTTL = 28 * 86_400

    /// The payload's size as FCM counts it, near enough: the bytes of data's keys and values and
    /// of the notification's texts.
    public var payloadSize: Int {
        data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
            + [notification?.title, notification?.body, notification?.image].reduce(0) { $0 + ($1?.utf8.count ?? 0) }
    }

    /// Checks FCM's rules; the first broken one, naming the job's field.
    public func validate() throws(FCMMessageError) {
        for key in data.keys.sorted() {
            if key.isEmpty { throw FCMMessageError(field: "fcm.data", "has an empty key") }
            if key == "from" || key == "message_type" || key.hasPrefix("google.") || key.hasPrefix("gcm.") {
                throw FCMMessageError(field: "fcm.data.\(key)", "is a key FCM reserves (from, message_type, google.*, gcm.*)")
            }
        }
        if let ttl, !(0...Self.maximumTTL).contains(ttl) {
            throw FCMMessageError(field: "fcm.android.ttl", "\(ttl) seconds is not between 0 and \(Self.maximumTTL) (four weeks)")
        }
        if let image = notification?.image, URL(string: image)?.scheme != "https" {
            throw FCMMessageError(field: "notification.image", "must be an https URL")
        }
        guard notification != nil || !data.isEmpty else {
            throw FCMMessageError(field: "notification", "an Android message needs a notification (title, body) or fcm.data")
        }
        guard payloadSize <= Self.maximumPayload else {
            throw FCMMessageError(field: "fcm", "the notification and data are \(payloadSize) bytes; FCM takes \(Self.maximumPayload)")
        }
    }

    /// The request body for one device: `{"message":{"token":"…",…}}`. The message is encoded
    /// once (`encoded()`), and a device's body is the token spliced in: a registration token is
    /// base64url and a colon, nothing JSON escapes.
    public func encoded() -> Encoded {
        var message: [String: Any] = [:]
        if let notification {
            var fields: [String: Any] = [:]
            if let title = notification.title { fields["title"] = title }
            if let body = notification.body { fields["body"] = body }
            if let image = notification.image { fields["image"] = image }
            message["notification"] = fields
        }
        if !data.isEmpty { message["data"] = data }
        var android: [String: Any] = [:]
        if let priority { android["priority"] = priority.rawValue }
        if let ttl { android["ttl"] = "\(ttl)s" }
        if let collapseKey { android["collapse_key"] = collapseKey }
        if let directBootOK { android["direct_boot_ok"] = directBootOK }
        if let channelID { android["notification"] = ["channel_id": channelID] }
        if !android.isEmpty { message["android"] = android }
        let rest = (try? JSONSerialization.data(withJSONObject: message, options: [.sortedKeys])).map { Array($0) } ?? Array("{}".utf8)
        // `{"message":{"token":"` + token + `"` + (`,` + the rest's members) + `}}`
        var suffix: [UInt8] = [UInt8(ascii: "\"")]
        if rest.count > 2 {
            suffix.append(UInt8(ascii: ","))
            suffix.append(contentsOf: rest[1..<(rest.count - 1)])
        }
        suffix.append(contentsOf: "}}".utf8)
        return Encoded(prefix: Array(#"{"message":{"token":""#.utf8), suffix: suffix)
    }

    /// The message name in FCM's answer to a send, `{"name": "projects/…/messages/…"}`: read
    /// by a scan of the bytes, as one answer per device comes back and a JSON parse of each was
    /// a visible share of the client's CPU; anything else is parsed as JSON.
    public static func name(inAnswer body: [UInt8]) -> String? {
        let key = Array(#""name""#.utf8)
        func isSpace(_ byte: UInt8) -> Bool { byte == 32 || byte == 9 || byte == 10 || byte == 13 }
        if let found = body.withUnsafeBufferPointer({ bytes -> String? in
            var index = 0
            while index + key.count <= bytes.count {
                defer { index += 1 }
                guard bytes[index] == key[0], bytes[index..<(index + key.count)].elementsEqual(key) else { continue }
                var cursor = index + key.count
                while cursor < bytes.count, isSpace(bytes[cursor]) { cursor += 1 }
                guard cursor < bytes.count, bytes[cursor] == UInt8(ascii: ":") else { continue }
                cursor += 1
                while cursor < bytes.count, isSpace(bytes[cursor]) { cursor += 1 }
                guard cursor < bytes.count, bytes[cursor] == UInt8(ascii: "\"") else { return nil }
                let start = cursor + 1
                var end = start
                while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\") { end += 1 }
                guard end < bytes.count, bytes[end] == UInt8(ascii: "\"") else { return nil }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            }
            return nil
        }) {
            return found
        }
        return ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any])?["name"] as? String
    }

    /// A message encoded once, for many devices.
    public struct Encoded: Sendable, Equatable {
        let prefix: [UInt8]
        let suffix: [UInt8]

        /// A body's bytes without its token.
        public var size: Int { prefix.count + suffix.count }

        /// Appends one device's request body to `bytes` (a batch of bodies), with no copy of its own.
        public func append(token: String, to bytes: inout [UInt8]) {
            bytes.append(contentsOf: prefix)
            bytes.append(contentsOf: token.utf8)
            bytes.append(contentsOf: suffix)
        }

        /// One device's request body.
        public func body(token: String) -> [UInt8] {
            var body: [UInt8] = []
            body.reserveCapacity(size + token.utf8.count)
            append(token: token, to: &body)
            return body
        }
    }
}

/// Why a job cannot go to Android devices as it is: the job's field and FCM's rule.
public struct FCMMessageError: Error, Sendable, Equatable, CustomStringConvertible {
    public let field: String
    public let message: String

    public init(field: String, _ message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { "\(field) \(message)" }
}

extension FCMMessage {
    /// Reads a job's cross-platform `notification` (`title`, `body`, `image`) and its `fcm`
    /// object (`data`, `android`: `priority`, `ttl` in seconds, `collapse_key`,
    /// `notification.channel_id`, `direct_boot_ok`), as parsed JSON; the first field that is
    /// wrong is named. The rules of ``validate()`` are checked after.
    public init(notification: Any?, fcm: Any?) throws(FCMMessageError) {
        self.init()
        if let notification {
            guard let fields = notification as? [String: Any] else { throw FCMMessageError(field: "notification", "is not an object") }
            try Self.only(["title", "body", "image"], in: fields, of: "notification")
            func text(_ key: String) throws(FCMMessageError) -> String? {
                guard let value = fields[key] else { return nil }
                guard let text = value as? String else { throw FCMMessageError(field: "notification.\(key)", "is not a string") }
                return text
            }
            self.notification = Notification(title: try text("title"), body: try text("body"), image: try text("image"))
        }
        guard let fcm else { return }
        guard let fields = fcm as? [String: Any] else { throw FCMMessageError(field: "fcm", "is not an object") }
        try Self.only(["data", "android"], in: fields, of: "fcm")
        if let data = fields["data"] {
            guard let data = data as? [String: Any] else { throw FCMMessageError(field: "fcm.data", "is not an object") }
            for (key, value) in data {
                // FCM refuses a number or a boolean in `data` (400 TYPE_STRING): say so before sending.
                guard let text = value as? String else { throw FCMMessageError(field: "fcm.data.\(key)", "is not a string (FCM's data values are strings)") }
                self.data[key] = text
            }
        }
        guard let android = fields["android"] else { return }
        guard let options = android as? [String: Any] else { throw FCMMessageError(field: "fcm.android", "is not an object") }
        try Self.only(["priority", "ttl", "collapse_key", "notification", "direct_boot_ok"], in: options, of: "fcm.android")
        if let value = options["priority"] {
            guard let text = value as? String, let priority = Priority(rawValue: text) else { throw FCMMessageError(field: "fcm.android.priority", "is not high or normal") }
            self.priority = priority
        }
        if let value = options["ttl"] {
            guard let number = value as? NSNumber, String(cString: number.objCType) != "c", let seconds = Int(exactly: number.doubleValue) else {
                throw FCMMessageError(field: "fcm.android.ttl", "is not a whole number of seconds")
            }
            ttl = seconds
        }
        if let value = options["collapse_key"] {
            guard let text = value as? String, !text.isEmpty else { throw FCMMessageError(field: "fcm.android.collapse_key", "is not a non-empty string") }
            collapseKey = text
        }
        if let value = options["direct_boot_ok"] {
            guard let flag = value as? Bool else { throw FCMMessageError(field: "fcm.android.direct_boot_ok", "is not true or false") }
            directBootOK = flag
        }
        if let value = options["notification"] {
            guard let fields = value as? [String: Any] else { throw FCMMessageError(field: "fcm.android.notification", "is not an object") }
            try Self.only(["channel_id"], in: fields, of: "fcm.android.notification")
            guard let channel = fields["channel_id"] as? String, !channel.isEmpty else {
                throw FCMMessageError(field: "fcm.android.notification.channel_id", "is not a non-empty string")
            }
            channelID = channel
        }
    }

    private static func only(_ known: Set<String>, in fields: [String: Any], of object: String) throws(FCMMessageError) {
        if let unknown = fields.keys.sorted().first(where: { !known.contains($0) }) {
            throw FCMMessageError(field: "\(object).\(unknown)", "is not a field pushworker knows (\(known.sorted().joined(separator: ", ")))")
        }
    }
}

extension FCMMessage {
    /// The message as a job's `notification` and `fcm` objects (nil when absent): what
    /// `init(notification:fcm:)` reads back, for a job the worker writes again (a chunk, a retry).
    public var jobFields: (notification: [String: Any]?, fcm: [String: Any]?) {
        var notificationFields: [String: Any]?
        if let notification {
            var fields: [String: Any] = [:]
            if let title = notification.title { fields["title"] = title }
            if let body = notification.body { fields["body"] = body }
            if let image = notification.image { fields["image"] = image }
            notificationFields = fields
        }
        var fcm: [String: Any] = [:]
        if !data.isEmpty { fcm["data"] = data }
        var android: [String: Any] = [:]
        if let priority { android["priority"] = priority.rawValue }
        if let ttl { android["ttl"] = ttl }
        if let collapseKey { android["collapse_key"] = collapseKey }
        if let directBootOK { android["direct_boot_ok"] = directBootOK }
        if let channelID { android["notification"] = ["channel_id": channelID] }
        if !android.isEmpty { fcm["android"] = android }
        return (notificationFields, fcm.isEmpty ? nil : fcm)
    }
}
