import APNs
import Foundation

extension PushJob {
    /// The body of a chunk job: this job with only `tokens` as its audience. A relative expiration
    /// is fixed to its absolute deadline, so chunks taken later do not live longer.
    public func chunkBody(tokens: [String]) -> [UInt8] {
        var object: [String: Any] = [
            "id": id, "app": app, "audience": ["tokens": tokens], "push_type": pushType.rawValue, "results": results.rawValue,
        ]
        object["payload"] = (try? JSONSerialization.jsonObject(with: Data(payload))) ?? [:]
        if let type { object["type"] = type }
        if let subtype { object["subtype"] = subtype }
        if let priority { object["priority"] = priority.rawValue }
        if let collapseID { object["collapse_id"] = collapseID }
        if let topic { object["topic"] = topic }
        if let replyTo { object["reply_to"] = replyTo }
        switch expiration {
        case .immediately?: object["expiration"] = "immediate"
        case let expiration?: object["expiration"] = Int64(expiration.deadline!.timeIntervalSince1970.rounded(.down))
        case nil: break
        }
        return Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }
}
