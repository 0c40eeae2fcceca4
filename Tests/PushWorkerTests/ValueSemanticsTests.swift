import AMQP
import APNs
import Foundation
import PushWorker
import Testing

/// A job and a message's properties keep their fields in one shared box until one copy is
/// written: each copy must still behave as a value of its own, and print its fields.
@Suite("Jobs and properties as values")
struct ValueSemanticsTests {
    static func job() -> PushJob {
        PushJob(id: "job-1", app: "demo", audience: PushJob.Audience(tokens: ["aa"], users: ["u1"]), type: "chat", payload: Array(#"{"aps":{}}"#.utf8))
    }

    @Test("a copy written to leaves the original as it was, field by field and through nested fields; equal copies are equal and hash alike")
    func jobCopies() {
        let original = Self.job()
        var copy = original
        #expect(copy == original)
        #expect(copy.hashValue == original.hashValue)
        copy.id = "job-2"
        copy.audience.tokens.append("bb")
        copy.payload.append(UInt8(ascii: " "))
        #expect(original.id == "job-1")
        #expect(original.audience.tokens == ["aa"])
        #expect(original.payload == Array(#"{"aps":{}}"#.utf8))
        #expect(copy.id == "job-2" && copy.audience.tokens == ["aa", "bb"])
        #expect(copy != original)
        var back = copy
        back.id = "job-1"
        back.audience.tokens = ["aa"]
        back.payload = original.payload
        #expect(back == original, "equal by their fields, not by their box")
        #expect(back.hashValue == original.hashValue)
    }

    @Test("a channel's audience has no device fields; a devices' audience no channel")
    func audienceKinds() {
        let channel = PushJob.Audience.channel("ch-1")
        #expect(channel.channel == "ch-1" && channel.tokens.isEmpty && channel.kind == .channel("ch-1"))
        let devices = PushJob.Audience(tokens: ["aa"])
        #expect(devices.channel == nil && devices.tokens == ["aa"])
        #expect(channel != PushJob.Audience())
    }

    @Test("properties: a copy written to leaves the original as it was; both print their fields")
    func propertiesCopies() {
        let original = AMQPProperties(contentType: "application/json", headers: ["x": .int64(1)], messageID: "m-1")
        var copy = original
        copy.messageID = "m-2"
        copy.headers?["y"] = .int64(2)
        #expect(original.messageID == "m-1" && original.headers == ["x": .int64(1)])
        #expect(copy.messageID == "m-2" && copy.headers?.count == 2)
        #expect(String(describing: original).contains("m-1"), "\(original)")
        #expect(String(describing: Self.job()).contains("job-1"), "\(Self.job())")
    }
}
