/// First-in first-out queue of publishes waiting for room in the confirm window.
struct PublishQueue {
    private var items: [PendingPublish] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }

    mutating func append(_ item: PendingPublish) {
        items.append(item)
    }

    mutating func popFirst() -> PendingPublish? {
        guard head < items.count else { return nil }
        let item = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return item
    }
}
