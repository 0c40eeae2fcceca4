import Foundation

/// One page of the ledger's records, newest first, and where the next one starts: nil when no
/// record follows, so a client stops on the page that ends the list, not on an empty one after it.
public struct DeliveryPage: Sendable, Hashable {
    public var records: [DeliveryRecord]
    public var next: DeliveryCursor?

    public init(records: [DeliveryRecord], next: DeliveryCursor?) {
        self.records = records
        self.next = next
    }
}

extension LedgerStore {
    /// The query's page: one record more is read than asked for, to tell whether any follows.
    public func page(_ query: DeliveryQuery) async throws(StoreError) -> DeliveryPage {
        var probe = query
        probe.limit = query.limit + 1
        var records = try await deliveries(probe)
        guard records.count > query.limit else { return DeliveryPage(records: records, next: nil) }
        records.removeLast(records.count - query.limit)
        return DeliveryPage(records: records, next: records.last.map(DeliveryCursor.init(after:)))
    }
}
