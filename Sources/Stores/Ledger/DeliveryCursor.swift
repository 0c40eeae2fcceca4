import Foundation

/// Where a page of the ledger's records ended: the last record's place in the order (time,
/// token, job, app). A client hands it back as it got it, to go on: an opaque URL-safe string
/// (base64url of a small JSON array), so it travels in a query string, a command line and a
/// JSON field alike, and nobody builds one by hand.
public struct DeliveryCursor: Sendable, Hashable {
    public var at: Int64
    public var token: String
    public var jobID: String
    public var app: String

    public init(after record: DeliveryRecord) {
        at = record.at
        token = record.token
        jobID = record.jobID
        app = record.app
    }

    /// The cursor a page's `next` carried; nil for text that is not one.
    public init?(_ text: String) {
        // A cursor holds four short fields; a longer one is not ours.
        guard !text.isEmpty, text.utf8.count <= 4096 else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") else { return nil }
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: base64),
            let fields = (try? JSONSerialization.jsonObject(with: data)) as? [Any], fields.count == 4,
            let number = fields[0] as? NSNumber, !JSONValue.isBoolean(number), let at = Int64(exactly: number.doubleValue),
            let token = fields[1] as? String, let jobID = fields[2] as? String, let app = fields[3] as? String
        else { return nil }
        self.at = at
        self.token = token
        self.jobID = jobID
        self.app = app
    }

    /// The string a client hands back.
    public var text: String {
        let data = (try? JSONSerialization.data(withJSONObject: [at, token, jobID, app] as [Any], options: [.withoutEscapingSlashes])) ?? Data()
        return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
