import APNs
import Foundation
import Testing

@Suite("APNs requests")
struct APNsRequestTests {
    static let token = String(repeating: "ab", count: 32)

    private func request(_ change: (inout APNsRequest) -> Void = { _ in }) -> APNsRequest {
        var request = APNsRequest(deviceToken: Self.token, topic: "com.example.app", payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        change(&request)
        return request
    }

    @Test("a well-formed request passes and carries the APNs headers")
    func headers() throws {
        let id = UUID()
        let valid = request {
            $0.expiration = .at(Date(timeIntervalSince1970: 1_900_000_000))
            $0.collapseID = "score"
            $0.apnsID = id
        }
        try valid.validate()
        #expect(valid.path == "/3/device/\(Self.token)")
        let headers = Dictionary(uniqueKeysWithValues: valid.headers.map { ($0.name, $0.value) })
        #expect(headers == [
            "apns-topic": "com.example.app", "apns-push-type": "alert", "apns-priority": "10",
            "apns-expiration": "1900000000", "apns-collapse-id": "score", "apns-id": id.uuidString.lowercased(),
        ])
    }

    @Test("background defaults to priority 5; immediate expiration is 0; relative expiration counts from its start")
    func defaults() {
        #expect(request { $0.pushType = .background }.headers.first { $0.name == "apns-priority" }?.value == "5")
        #expect(request { $0.expiration = .immediately }.headers.first { $0.name == "apns-expiration" }?.value == "0")
        let start = Date(timeIntervalSince1970: 1_000)
        let relative = APNsExpiration.after(.seconds(60), since: start)
        #expect(relative.headerValue == "1060")
        #expect(!relative.hasPassed(at: Date(timeIntervalSince1970: 1_059)))
        #expect(relative.hasPassed(at: Date(timeIntervalSince1970: 1_060)))
        #expect(!APNsExpiration.immediately.hasPassed())
    }

    @Test(
        "each rule names its field",
        arguments: [
            ("payload", "payload is 4097 bytes; APNs allows at most 4096 for push type alert"),
            ("voip payload", "payload is 5121 bytes; APNs allows at most 5120 for push type voip"),
            ("collapse_id", "collapse_id is 65 bytes; APNs allows at most 64"),
            ("priority", "background pushes must use priority 5 or 1"),
            ("token", "is not hexadecimal"),
            ("odd token", "has 63 hex digits"),
            ("topic", "push type voip needs a topic ending in '.voip'"),
            ("empty payload", "payload is empty"),
        ])
    func rule(name: String, message: String) {
        let bad: APNsRequest
        var field = name
        switch name {
        case "payload": bad = request { $0.payload = [UInt8](repeating: 32, count: 4097) }
        case "voip payload":
            bad = request { $0.pushType = .voip; $0.topic += ".voip"; $0.payload = [UInt8](repeating: 32, count: 5121) }
            field = "payload"
        case "collapse_id": bad = request { $0.collapseID = String(repeating: "é", count: 32) + "x" }
        case "priority": bad = request { $0.pushType = .background; $0.priority = .immediate }
        case "token": bad = request { $0.deviceToken = "zz" + Self.token.dropFirst(2) }
        case "odd token": bad = request { $0.deviceToken = String(Self.token.dropFirst()) }; field = "token"
        case "topic": bad = request { $0.pushType = .voip; $0.payload = [1] }
        default: bad = request { $0.payload = [] }; field = "payload"
        }
        expectRefused(bad, field: field, message: message, name)
    }

    @Test("the voip limit is 5120 bytes and other types stay at 4096")
    func payloadLimits() throws {
        try request { $0.pushType = .voip; $0.topic += ".voip"; $0.payload = [UInt8](repeating: 32, count: 5120) }.validate()
        try request { $0.payload = [UInt8](repeating: 32, count: 4096) }.validate()
    }

    @Test("unknown push types and priorities are refused with the valid values")
    func parsing() throws {
        #expect(try APNsPushType(validating: "liveactivity") == .liveactivity)
        #expect(throws: APNsValidationError.self) { try APNsPushType(validating: "toast") }
        do { _ = try APNsPushType(validating: "toast") } catch { #expect(error.message.contains("alert, background, voip")) }
        #expect(try APNsPriority(validating: 1) == .low)
        do { _ = try APNsPriority(validating: 7) } catch { #expect(error.field == "priority") }
    }
}

@Suite("APNs responses and reasons")
struct APNsResponseTests {
    @Test("every documented reason round-trips through its string, with its status")
    func reasons() {
        #expect(APNsErrorReason.known.count == 39)
        for reason in APNsErrorReason.known {
            #expect(APNsErrorReason(reason.rawValue) == reason)
        }
        #expect(APNsErrorReason("BadEnvironmentKeyInToken") == .badEnvironmentKeyInToken)
        #expect(APNsErrorReason("SomethingNew") == .other("SomethingNew"))
        #expect(APNsErrorReason.unregistered.status == 410)
        #expect(APNsErrorReason.expiredToken.status == 410)
        #expect(APNsErrorReason.payloadTooLarge.status == 413)
        #expect(APNsErrorReason.tooManyRequests.status == 429)
        #expect(APNsErrorReason.invalidProviderToken.status == 403)
        #expect(APNsErrorReason.shutdown.status == 503)
        #expect(APNsErrorReason.badPath.status == 404)
    }

    @Test("reasons say what a sender should do")
    func dispositions() {
        #expect(APNsErrorReason.badDeviceToken.disposition == .final)
        #expect(APNsErrorReason.unregistered.disposition == .final)
        #expect(APNsErrorReason.unregistered.deviceFate == .gone)
        #expect(APNsErrorReason.expiredToken.deviceFate == .gone)
        #expect(APNsErrorReason.badDeviceToken.deviceFate == .invalid)
        #expect(APNsErrorReason.deviceTokenNotForTopic.deviceFate == .invalid)
        #expect(APNsErrorReason.tooManyRequests.deviceFate == nil)
        #expect(APNsErrorReason.badTopic.deviceFate == nil)
        #expect(APNsErrorReason.expiredProviderToken.disposition == .retryWithNewProviderToken)
        #expect(APNsErrorReason.tooManyRequests.disposition == .retry)
        #expect(APNsErrorReason.serviceUnavailable.disposition == .retry)
        #expect(APNsErrorReason.shutdown.disposition == .retryOnNewConnection)
        #expect(APNsErrorReason.invalidProviderToken.disposition == .final)
    }

    @Test("a 410 body gives the reason and the millisecond timestamp")
    func parse410() {
        let response = APNsResponse.parse(status: 410, apnsID: "x", apnsUniqueID: nil, body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8))
        #expect(response.reason == .unregistered)
        #expect(response.timestamp == Date(timeIntervalSince1970: 1_700_000_000.123))
        #expect(!response.isDelivered)
    }
}
