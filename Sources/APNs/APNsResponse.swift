import Foundation

/// What APNs answered for one request.
public struct APNsResponse: Sendable, Hashable {
    public var status: Int
    /// `apns-id`: the one sent, or the one APNs assigned.
    public var apnsID: String?
    /// `apns-unique-id`: sandbox only, for looking the notification up in the console.
    public var apnsUniqueID: String?
    /// `apns-request-id`: broadcasts and channel management; the one sent, or the one APNs made.
    public var requestID: String?
    public var reason: APNsErrorReason?
    /// For 410: when APNs last knew the token was valid (the body's milliseconds since 1970).
    public var timestamp: Date?
    /// The HTTP/2 requests the client made for this answer: more than 1 when a connection was lost
    /// or a stream refused before an answer was read and the request went again. APNs may have
    /// delivered the lost one: the device may show the notification twice. (A request refused for
    /// a stale provider token and sent again with a new one is not counted: APNs delivered nothing.)
    public var sends = 1

    public init(
        status: Int, apnsID: String? = nil, apnsUniqueID: String? = nil, reason: APNsErrorReason? = nil, timestamp: Date? = nil,
        requestID: String? = nil
    ) {
        self.status = status
        self.requestID = requestID
        self.apnsID = apnsID
        self.apnsUniqueID = apnsUniqueID
        self.reason = reason
        self.timestamp = timestamp
    }

    public var isDelivered: Bool { status == 200 }

    /// What a sender should do about a refusal: its reason's disposition, and for a reason this
    /// client does not know, the status's (5xx: APNs' trouble, try again; 4xx: the request's).
    public var disposition: APNsErrorReason.Disposition {
        reason?.disposition ?? (status >= 500 ? .retry : .final)
    }

    /// Reads the `{"reason": …, "timestamp": …}` body of an error response.
    public static func parse(status: Int, apnsID: String?, apnsUniqueID: String?, requestID: String? = nil, body: [UInt8]) -> APNsResponse {
        var response = APNsResponse(status: status, apnsID: apnsID, apnsUniqueID: apnsUniqueID, requestID: requestID)
        guard status != 200, !body.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        else {
            return response
        }
        if let reason = object["reason"] as? String { response.reason = APNsErrorReason(reason) }
        if let milliseconds = (object["timestamp"] as? NSNumber)?.doubleValue {
            response.timestamp = Date(timeIntervalSince1970: milliseconds / 1000)
        }
        return response
    }
}
