import Stores
import APNs
import Foundation

extension PushJob {
    /// The body of a chunk or retry job: this job with `devices` (and `filtered`) as its
    /// audience, resolved: `"audience": {"devices": [["<token>", "<user>" | null], …], "filtered": […]}`.
    /// The payload goes in as the bytes the decoder made of it, spliced in rather than parsed and
    /// written again, and so do the pairs, written straight from the recipients. A relative
    /// expiration is fixed to its deadline, so chunks taken later do not live longer.
    public func chunkBody(devices: [Recipient], filtered: [Recipient] = []) throws -> [UInt8] {
        var object: [String: Any] = ["id": id, "app": app, "push_type": pushType.rawValue, "results": results.rawValue]
        if let type { object["type"] = type }
        if let subtype { object["subtype"] = subtype }
        if let priority { object["priority"] = priority.rawValue }
        if let collapseID { object["collapse_id"] = collapseID }
        if let topic { object["topic"] = topic }
        if let replyTo { object["reply_to"] = replyTo }
        if let quietHours { object["quiet_hours"] = quietHours.rawValue }
        if tokenNamespace != .devices {
            // "#push-to-start" or "#activity:<id>" without the app: the 410s of the chunk's
            // devices are reported where they were registered.
            object["token_namespace"] = String(tokenNamespace.registryApp("").dropFirst())
        }
        if let expiration {
            object["expiration"] = expiration.deadline.map { Int64($0.timeIntervalSince1970.rounded(.down)) as Any } ?? "immediate"
        }
        // What its Android devices are sent, as the producer named it.
        if let fcm {
            let fields = fcm.jobFields
            object["notification"] = fields.notification
            object["fcm"] = fields.fcm
        }
        guard let rest = JSONDocument.bytes(object), rest.last == UInt8(ascii: "}") else {
            throw JobError(.invalidJSON, field: nil, "the chunk job of '\(id)' could not be written")
        }
        var body = Array(rest.dropLast())
        body.reserveCapacity(body.count + payload.count + (devices.count + filtered.count) * 80 + 64)
        body += #","audience":{"devices":"#.utf8
        Self.appendPairs(devices, to: &body)
        if !filtered.isEmpty {
            body += #","filtered":"#.utf8
            Self.appendPairs(filtered, to: &body)
        }
        body += #"},"payload":"#.utf8
        // A counted badge goes as the producer wrote it: the worker that takes the chunk counts.
        body += badge?.producerPayload ?? payload
        body.append(UInt8(ascii: "}"))
        return body
    }

    private static func appendPairs(_ recipients: [Recipient], to body: inout [UInt8]) {
        body.append(UInt8(ascii: "["))
        for (index, recipient) in recipients.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(UInt8(ascii: "["))
            JSONText.appendString(recipient.token, to: &body)
            body.append(UInt8(ascii: ","))
            if let user = recipient.user { JSONText.appendString(user, to: &body) } else { body += "null".utf8 }
            if recipient.platform == .fcm { body += #","fcm""#.utf8 }
            body.append(UInt8(ascii: "]"))
        }
        body.append(UInt8(ascii: "]"))
    }
}
