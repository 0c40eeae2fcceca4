@testable import AMQP
import Testing

/// The publisher-confirm bookkeeping, driven the way the broker drives it, without a broker.
@Suite("Confirm window")
struct ConfirmWindowTests {
    /// What became of each publish: nil while it waits, then "ok" or the error's kind.
    final class Outcomes {
        var results: [String: String] = [:]
        var order: [String] = []

        func publish(_ name: String, mandatory: Bool = false, routingKey: String = "jobs", messageID: String? = nil) -> PendingPublish {
            let message = AMQPMessage(
                exchange: "push", routingKey: routingKey, body: Array(name.utf8),
                properties: AMQPProperties(messageID: messageID), mandatory: mandatory)
            return PendingPublish(message: message) { error in
                precondition(self.results[name] == nil, "\(name) resolved twice")
                self.results[name] = error.map { "\($0.kind)" } ?? "ok"
                self.order.append(name)
            }
        }
    }

    private func makeWindow(_ outcomes: Outcomes, _ names: [String]) -> ConfirmWindow {
        var window = ConfirmWindow()
        for name in names { window.append(outcomes.publish(name)) }
        return window
    }

    @Test("tags are handed out from 1 in publish order")
    func tags() {
        let outcomes = Outcomes()
        var window = ConfirmWindow()
        #expect(window.append(outcomes.publish("a")) == 1)
        #expect(window.append(outcomes.publish("b")) == 2)
        #expect(window.nextDeliveryTag == 3)
        #expect(window.count == 2)
        #expect(outcomes.results.isEmpty)
    }

    @Test("single acks out of order resolve exactly their publish; the floor waits for the oldest")
    func outOfOrder() {
        let outcomes = Outcomes()
        var window = makeWindow(outcomes, ["a", "b", "c", "d"])
        window.confirm(upTo: 3, multiple: false, acknowledged: true)
        #expect(outcomes.results == ["c": "ok"])
        #expect(window.lowestUnconfirmed == 1)
        window.confirm(upTo: 2, multiple: false, acknowledged: true)
        #expect(window.lowestUnconfirmed == 1)
        window.confirm(upTo: 1, multiple: false, acknowledged: true)
        // 1, 2 and 3 are resolved: the floor jumps to 4 at once.
        #expect(window.lowestUnconfirmed == 4)
        #expect(outcomes.order == ["c", "b", "a"])
        #expect(window.count == 1)
        window.confirm(upTo: 4, multiple: false, acknowledged: true)
        #expect(window.isEmpty)
        #expect(window.lowestUnconfirmed == 5)
        #expect(outcomes.results == ["a": "ok", "b": "ok", "c": "ok", "d": "ok"])
    }

    @Test("a multiple ack resolves every tag up to it, in order, and skips those resolved already")
    func multiple() {
        let outcomes = Outcomes()
        var window = makeWindow(outcomes, ["a", "b", "c", "d", "e"])
        window.confirm(upTo: 2, multiple: false, acknowledged: true)
        window.confirm(upTo: 4, multiple: true, acknowledged: true)
        #expect(outcomes.order == ["b", "a", "c", "d"])
        #expect(outcomes.results["e"] == nil)
        #expect(window.count == 1)
        #expect(window.lowestUnconfirmed == 5)
        // A repeated or stale confirm changes nothing.
        window.confirm(upTo: 4, multiple: true, acknowledged: false)
        window.confirm(upTo: 3, multiple: false, acknowledged: true)
        #expect(outcomes.order == ["b", "a", "c", "d"])
        #expect(window.count == 1)
    }

    @Test("a nack fails its publishes as nacked, single or multiple")
    func nack() {
        let outcomes = Outcomes()
        var window = makeWindow(outcomes, ["a", "b", "c", "d"])
        window.confirm(upTo: 3, multiple: false, acknowledged: false)
        window.confirm(upTo: 2, multiple: true, acknowledged: false)
        window.confirm(upTo: 4, multiple: false, acknowledged: true)
        #expect(outcomes.results == ["a": "nacked", "b": "nacked", "c": "nacked", "d": "ok"])
        #expect(window.isEmpty)
    }

    @Test("a return before its confirm fails that publish as returned, and only that one")
    func returnBeforeConfirm() {
        let outcomes = Outcomes()
        var window = ConfirmWindow()
        window.append(outcomes.publish("plain", routingKey: "nowhere"))
        window.append(outcomes.publish("other-key", mandatory: true, routingKey: "elsewhere", messageID: "m1"))
        window.append(outcomes.publish("first", mandatory: true, routingKey: "nowhere", messageID: "m1"))
        window.append(outcomes.publish("second", mandatory: true, routingKey: "nowhere", messageID: "m1"))
        window.append(outcomes.publish("other-id", mandatory: true, routingKey: "nowhere", messageID: "m2"))
        let returned = AMQPError(.returned, "no route", replyCode: 312, replyText: "NO_ROUTE")

        // The oldest matching mandatory publish not marked already: "first", then "second".
        var matched: [Bool] = []
        for _ in 1...3 {
            matched.append(window.markReturned(exchange: "push", routingKey: "nowhere", messageID: "m1", as: returned))
        }
        matched.append(window.markReturned(exchange: "other", routingKey: "nowhere", messageID: "m2", as: returned))
        #expect(matched == [true, true, false, false])
        #expect(outcomes.results.isEmpty, "a return alone resolves nothing: the confirm follows")

        window.confirm(upTo: 5, multiple: true, acknowledged: true)
        #expect(outcomes.results == ["plain": "ok", "other-key": "ok", "first": "returned", "second": "returned", "other-id": "ok"])
    }

    @Test("a returned publish keeps the broker's reply")
    func returnedReply() throws {
        var window = ConfirmWindow()
        var failure: AMQPError?
        window.append(PendingPublish(message: .toQueue("missing", body: [1])) { failure = $0 })
        let marked = window.markReturned(
            exchange: "", routingKey: "missing", messageID: nil,
            as: AMQPError(.returned, "no queue", replyCode: 312, replyText: "NO_ROUTE"))
        #expect(marked)
        window.confirm(upTo: 1, multiple: false, acknowledged: true)
        let error = try #require(failure)
        #expect(error.kind == .returned)
        #expect(error.replyCode == 312)
        #expect(error.replyText == "NO_ROUTE")
    }

    @Test("a lost connection fails the whole window in publish order, and the next numbers from 1")
    func reset() {
        let outcomes = Outcomes()
        var window = makeWindow(outcomes, ["a", "b", "c", "d"])
        window.confirm(upTo: 2, multiple: false, acknowledged: true)
        window.confirm(upTo: 1, multiple: false, acknowledged: false)
        window.reset(failing: AMQPError(.connectionLost, "gone"))
        #expect(outcomes.results == ["a": "nacked", "b": "ok", "c": "connectionLost", "d": "connectionLost"])
        #expect(outcomes.order == ["b", "a", "c", "d"])
        #expect(window.isEmpty)
        #expect(window.nextDeliveryTag == 1)
        #expect(window.lowestUnconfirmed == 1)
        #expect(window.nackedSince == nil)

        // A confirm for a tag of the old connection finds nothing; the new tags start at 1.
        window.confirm(upTo: 4, multiple: true, acknowledged: true)
        #expect(window.append(outcomes.publish("e")) == 1)
        window.confirm(upTo: 1, multiple: false, acknowledged: true)
        #expect(outcomes.results["e"] == "ok")
    }

    @Test("a nack streak is measured from the first nack, ended by any ack, and reported once")
    func nackStreak() {
        let outcomes = Outcomes()
        var window = makeWindow(outcomes, ["a", "b", "c", "d"])
        let start = ContinuousClock.now
        var exceeded: [Bool] = []
        func check(_ now: ContinuousClock.Instant) { exceeded.append(window.nackStreakExceeds(.seconds(1), now: now)) }
        check(start + .seconds(5))

        window.confirm(upTo: 1, multiple: false, acknowledged: false, now: start)
        window.confirm(upTo: 2, multiple: false, acknowledged: false, now: start + .milliseconds(900))
        #expect(window.nackedSince == start)
        check(start + .milliseconds(1000))
        check(start + .milliseconds(1001))
        #expect(window.nackedSince == nil)
        check(start + .seconds(5))
        #expect(exceeded == [false, false, true, false])

        window.confirm(upTo: 3, multiple: false, acknowledged: false, now: start + .seconds(6))
        window.confirm(upTo: 4, multiple: false, acknowledged: true, now: start + .seconds(6))
        #expect(window.nackedSince == nil)
        check(start + .seconds(60))
        #expect(exceeded == [false, false, true, false, false])
    }
}
