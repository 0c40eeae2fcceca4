import Synchronization

/// One device's admission slot, given back exactly once: when the device's task ends, or, once
/// handed over, when the ledger has written its record (see `JobProcessor.report`).
final class SlotRelease: Sendable {
    private let slots: DeviceAdmission.Slots
    private let handedOver = Atomic(false)
    private let released = Atomic(false)

    init(_ slots: DeviceAdmission.Slots) {
        self.slots = slots
    }

    /// Whether other devices of the app wait for a slot now: one handed over is then worth
    /// giving back soon (the ledger's writer does not let its batch gather).
    var othersWait: Bool { slots.othersWait }

    /// Someone else gives the slot back now (the ledger's writer).
    func handOver() {
        handedOver.store(true, ordering: .relaxed)
    }

    func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        slots.releaseOne()
    }

    /// At the end of the device's task: gives the slot back unless it was handed over.
    func releaseUnlessHandedOver() {
        if !handedOver.load(ordering: .relaxed) { release() }
    }
}
