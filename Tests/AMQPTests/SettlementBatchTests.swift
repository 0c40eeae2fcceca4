@testable import AMQP
import Testing

/// Consumer-side ack coalescing, checked frame by frame, without a broker.
@Suite("Settlement batch")
struct SettlementBatchTests {
    /// An ack frame as the driver would send it.
    struct Frame: Equatable, CustomStringConvertible {
        var tag: UInt64
        var multiple: Bool
        var description: String { multiple ? "ack ≤\(tag)" : "ack \(tag)" }
    }

    private func unsettled(_ tags: ClosedRange<UInt64>) -> UnsettledTags {
        var unsettled = UnsettledTags()
        for tag in tags { unsettled.insert(tag) }
        return unsettled
    }

    private func send(_ acks: [UInt64], settling unsettled: inout UnsettledTags) -> [Frame] {
        var batch = SettlementBatch()
        for tag in acks { batch.add(tag) }
        var frames: [Frame] = []
        batch.send(settling: &unsettled) { frames.append(Frame(tag: $0, multiple: $1)) }
        return frames
    }

    @Test("acks of the oldest deliveries, in any order, go out as one multiple ack")
    func coalesced() {
        var unsettled = unsettled(1...5)
        #expect(send([3, 1, 2], settling: &unsettled) == [Frame(tag: 3, multiple: true)])
        #expect(unsettled.lowest == 4)
    }

    @Test("an ack above a delivery still unsettled goes out on its own")
    func gap() {
        var unsettled = unsettled(1...5)
        #expect(send([2, 3], settling: &unsettled) == [Frame(tag: 2, multiple: false), Frame(tag: 3, multiple: false)])
        #expect(unsettled.lowest == 1)
        // The rest below the gap is still coalesced; the ones above it come first, in their order.
        #expect(send([5, 1], settling: &unsettled) == [Frame(tag: 5, multiple: false), Frame(tag: 1, multiple: true)])
        #expect(unsettled.lowest == 4)
    }

    @Test("with everything settled, the multiple ack reaches the highest tag of the batch")
    func allSettled() {
        var unsettled = unsettled(1...3)
        unsettled.settle(.nack(multiple: false, requeue: true), tag: 2)
        #expect(send([3, 1], settling: &unsettled) == [Frame(tag: 3, multiple: true)])
        #expect(unsettled.lowest == nil)
    }

    @Test("an empty batch sends nothing and settles nothing")
    func empty() {
        var unsettled = unsettled(1...2)
        #expect(send([], settling: &unsettled).isEmpty)
        #expect(unsettled.lowest == 1)
    }

    @Test("a failing send stops the batch")
    func failing() {
        struct Broken: Error {}
        var unsettled = unsettled(1...5)
        var batch = SettlementBatch()
        for tag: UInt64 in [4, 5, 1] { batch.add(tag) }
        var frames: [Frame] = []
        #expect(throws: Broken.self) {
            try batch.send(settling: &unsettled) { tag, multiple in
                frames.append(Frame(tag: tag, multiple: multiple))
                throw Broken()
            }
        }
        #expect(frames == [Frame(tag: 4, multiple: false)])
    }

    @Test("multiple acks and nacks settle everything up to their tag; the rest one delivery")
    func settle() {
        var unsettled = unsettled(1...6)
        unsettled.settle(.reject(requeue: false), tag: 1)
        #expect(unsettled.lowest == 2)
        unsettled.settle(.ack(multiple: true), tag: 3)
        #expect(unsettled.lowest == 4)
        unsettled.settle(.ack(multiple: false), tag: 5)
        #expect(unsettled.lowest == 4)
        unsettled.settle(.nack(multiple: true, requeue: false), tag: 5)
        #expect(unsettled.lowest == 6)
        unsettled.settle(.nack(multiple: false, requeue: true), tag: 6)
        #expect(unsettled.lowest == nil)
    }

    @Test("the oldest unsettled tag follows deliveries handed out after a gap")
    func lowestAfterGap() {
        var unsettled = UnsettledTags()
        unsettled.insert(10)
        unsettled.insert(11)
        unsettled.remove(10)
        unsettled.insert(12)
        #expect(unsettled.lowest == 11)
        unsettled.remove(11)
        unsettled.remove(12)
        #expect(unsettled.lowest == nil)
        unsettled.insert(20)
        #expect(unsettled.lowest == 20)
    }
}
