import Synchronization

/// An app's bound on devices in flight (`max_in_flight`), shared by both lanes' jobs: the
/// pipeline's one admission gate.
///
/// It lives here, not in the APNs client, because a device holds its slot past APNs' answer:
/// through its retries and until its result is confirmed by the broker. A device gets a task only
/// once it holds a slot, so devices still waiting cost no task and no memory, and memory follows
/// this bound, not the jobs in hand times their size. The now lane's devices may take the slots
/// reserved for it, so a one-device job never waits behind a broadcast.
public final class DeviceAdmission: Sendable {
    private let semaphore: AsyncSemaphore
    public let maxInFlight: Int

    /// - Parameter nowReserve: of `maxInFlight`, the slots only the now lane takes.
    public init(maxInFlight: Int, nowReserve: Int = 0) {
        self.maxInFlight = max(1, maxInFlight)
        semaphore = AsyncSemaphore(limit: self.maxInFlight, reserve: nowReserve)
    }

    /// Waits for one slot, then takes as many more as are free now, up to `limit`: a batch never
    /// waits to fill up while its first devices could already go.
    func admit(upTo limit: Int, lane: Lane) async -> Slots {
        let priority: AsyncSemaphore.Priority = lane == .now ? .high : .normal
        await semaphore.acquire(priority)
        var taken = 1
        while taken < limit, semaphore.tryAcquire(priority) { taken += 1 }
        return Slots(count: taken, semaphore: semaphore)
    }

    /// The slots of one batch of devices. Each device gives its own back as it finishes, so the
    /// next devices go while the batch's slow ones still wait; whatever was not given back (a
    /// cancelled job's unsent devices, a thrown error) returns when the last reference goes, so
    /// no path leaks a slot.
    final class Slots: Sendable {
        let count: Int
        private let held: Atomic<Int>
        private let semaphore: AsyncSemaphore

        fileprivate init(count: Int, semaphore: AsyncSemaphore) {
            self.count = count
            self.held = Atomic(count)
            self.semaphore = semaphore
        }

        /// Whether devices wait for a slot of this app now.
        var othersWait: Bool { semaphore.hasWaiters }

        /// Gives back one device's slot.
        func releaseOne() {
            let (before, _) = held.subtract(1, ordering: .relaxed)
            precondition(before > 0, "a batch gave back more admission slots than it took")
            semaphore.release()
        }

        deinit {
            for _ in 0..<held.load(ordering: .relaxed) { semaphore.release() }
        }
    }
}
