import Testing

@testable import PushWorker

/// The slots a batch of devices takes come back one by one as devices finish, and all of the
/// rest when the batch is dropped (a cancelled job): no path leaks one.
@Suite("DeviceAdmission: batches of slots")
struct DeviceAdmissionTests {
    @Test("a batch takes what is free up to its limit; released and dropped slots come back")
    func slotsComeBack() async {
        let admission = DeviceAdmission(maxInFlight: 10, nowReserve: 2)
        var first: DeviceAdmission.Slots? = await admission.admit(upTo: 64, lane: .bulk)
        #expect(first?.count == 8, "the bulk lane leaves the now lane's reserve")
        var now: DeviceAdmission.Slots? = await admission.admit(upTo: 64, lane: .now)
        #expect(now?.count == 2)
        now = nil
        first?.releaseOne()
        first?.releaseOne()
        let next = await admission.admit(upTo: 64, lane: .bulk)
        #expect(next.count == 2, "two devices gave theirs back; the reserve stays free")
        first = nil  // the other six, never given back one by one
        let rest = await admission.admit(upTo: 64, lane: .bulk)
        #expect(rest.count == 6)
        _ = (now, next, rest)
    }
}
