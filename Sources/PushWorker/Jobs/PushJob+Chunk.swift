import APNs
import Foundation

extension PushJob {
    /// The body of a chunk or retry job: this job with only `tokens` as its audience. The payload
    /// goes in as the bytes the decoder made of it, spliced in rather than parsed and written
    /// again. A relative expiration is fixed to its deadline, so chunks taken later do not live
    /// longer.
    public func chunkBody(tokens: [String]) throws -> [UInt8] {
        var object: [String: Any] = [
            "id": id, "app": app, "audience": ["tokens": tokens], "push_type": pushType.rawValue, "results": results.rawValue,
        ]
        if let type { object["type"] = type }
        if let subtype { object["subtype"] = subtype }
        if let priority { object["priority"] = priority.rawValue }
        if let collapseID { object["collapse_id"] = collapseID }
        if let topic { object["topic"] = topic }
        if let replyTo { object["reply_to"] = replyTo }
        if let expiration {
            object["expiration"] = expiration.deadline.map { Int64($0.timeIntervalSince1970.rounded(.down)) as Any } ?? "immediate"
        }
        let rest = Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
        guard rest.last == UInt8(ascii: "}") else {
            throw JobError(.invalidJSON, field: nil, "the chunk job of '\(id)' could not be written")
        }
        return Array(rest.dropLast()) + Array(#","payload":"#.utf8) + payload + [UInt8(ascii: "}")]
    }
}
