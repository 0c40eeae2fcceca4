import APNs
import Foundation
import Testing

@Suite("APNs broadcast requests and channels")
struct BroadcastRequestTests {
    static let channel = "dHN0LTEyMzQ1Njc4OTAxMg=="

    private func broadcast(_ change: (inout APNsRequest) -> Void = { _ in }) -> APNsRequest {
        var request = APNsRequest(
            deviceToken: "", topic: "com.example.app", pushType: .liveactivity,
            payload: Array(#"{"aps":{"event":"update","content-state":{"score":1},"timestamp":1700000000}}"#.utf8), channelID: Self.channel)
        change(&request)
        return request
    }

    @Test("a broadcast goes to /4/broadcasts/apps/<bundle id> with the channel's headers and no apns-topic")
    func headers() throws {
        let id = UUID()
        let request = broadcast {
            $0.priority = .conservePower
            $0.expiration = .at(Date(timeIntervalSince1970: 1_900_000_000))
            $0.requestID = id
        }
        try request.validate()
        #expect(request.isBroadcast)
        #expect(request.path == "/4/broadcasts/apps/com.example.app")
        #expect(request.headers.map(\.name) == ["apns-channel-id", "apns-push-type", "apns-priority", "apns-expiration", "apns-request-id"])
        let headers = Dictionary(uniqueKeysWithValues: request.headers.map { ($0.name, $0.value) })
        #expect(headers == [
            "apns-channel-id": Self.channel, "apns-push-type": "liveactivity", "apns-priority": "5",
            "apns-expiration": "1900000000", "apns-request-id": id.uuidString.lowercased(),
        ])
        // The Live Activity device topic names the same app.
        #expect(broadcast { $0.topic = "com.example.app.push-type.liveactivity" }.path == "/4/broadcasts/apps/com.example.app")
        // Priority 10 by default; no expiration or request id unless given.
        #expect(broadcast().headers.map(\.name) == ["apns-channel-id", "apns-push-type", "apns-priority"])
        #expect(broadcast().headers.first { $0.name == "apns-priority" }?.value == "10")
    }

    @Test("a device request ignores requestID and keeps its path")
    func deviceIgnoresRequestID() throws {
        let request = APNsRequest(
            deviceToken: String(repeating: "ab", count: 32), topic: "com.example.app", payload: Array("{}".utf8), requestID: UUID())
        try request.validate()
        #expect(!request.isBroadcast)
        #expect(request.path.hasPrefix("/3/device/"))
        #expect(!request.headers.contains { $0.name == "apns-request-id" })
    }

    @Test(
        "each broadcast rule names its field",
        arguments: [
            ("empty channel", "channel", "channel id is empty"),
            ("channel not base64", "channel", "is not standard base64"),
            ("channel base64url", "channel", "is not standard base64"),
            ("channel unpadded", "channel", "is not standard base64"),
            ("channel too long", "channel", "at most 128"),
            ("push type", "push_type", "must use push type liveactivity"),
            ("priority", "priority", "priority 10 or 5"),
            ("collapse id", "collapse_id", "take no collapse_id"),
            ("empty payload", "payload", "payload is empty"),
            ("large payload", "payload", "payload is 5121 bytes; APNs allows at most 5120 for a broadcast"),
            ("empty topic", "topic", "topic"),
        ])
    func rule(name: String, field: String, message: String) {
        let bad = broadcast {
            switch name {
            case "empty channel": $0.channelID = ""
            case "channel not base64": $0.channelID = "not base64!"
            case "channel base64url": $0.channelID = "ab-_cd=="
            case "channel unpadded": $0.channelID = "abc"
            case "channel too long": $0.channelID = String(repeating: "A", count: 132)
            case "push type": $0.pushType = .alert
            case "priority": $0.priority = .low
            case "collapse id": $0.collapseID = "x"
            case "empty payload": $0.payload = []
            case "large payload": $0.payload = [UInt8](repeating: 32, count: 5121)
            default: $0.topic = ".push-type.liveactivity"
            }
        }
        expectRefused(bad, field: field, message: message, name)
    }

    @Test("the broadcast payload limit is 5120 bytes; a device Live Activity stays at 4096; 128-byte ids pass")
    func limits() throws {
        try broadcast { $0.payload = [UInt8](repeating: 32, count: APNsRequest.broadcastPayloadLimit) }.validate()
        try broadcast { $0.channelID = String(repeating: "A", count: APNsChannel.maximumIDBytes) }.validate()
        #expect(APNsPushType.liveactivity.payloadLimit == 4096)
    }

    @Test("storage policies by name and number; channel reasons are final and say nothing of devices")
    func policiesAndReasons() {
        #expect(APNsChannelStoragePolicy(name: "none") == .noMessageStored)
        #expect(APNsChannelStoragePolicy(name: "most_recent") == .mostRecentMessageStored)
        #expect(APNsChannelStoragePolicy(name: "1") == .mostRecentMessageStored)
        #expect(APNsChannelStoragePolicy(name: "all") == nil)
        #expect(APNsChannelStoragePolicy.allCases.map(\.name) == ["none", "most_recent"])
        let reasons: [APNsErrorReason] = [.missingChannelId, .badChannelId, .channelNotRegistered, .cannotCreateChannelConfig, .missingPushType, .featureNotEnabled]
        for reason in reasons {
            #expect(APNsErrorReason(reason.rawValue) == reason)
            #expect(reason.status == 400)
            #expect(reason.disposition == .final)
            #expect(reason.deviceFate == nil)
        }
        #expect(APNsErrorReason("ChannelNotRegistered") == .channelNotRegistered)
    }

    @Test("apns-request-id is read into the response")
    func responseRequestID() {
        let response = APNsResponse.parse(
            status: 400, apnsID: nil, apnsUniqueID: nil, requestID: "abc", body: Array(#"{"reason":"ChannelNotRegistered"}"#.utf8))
        #expect(response.requestID == "abc")
        #expect(response.reason == .channelNotRegistered)
    }
}
