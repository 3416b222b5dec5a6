/// The last `capacity` deliveries, oldest overwritten first.
struct DeliveryRing: Sendable {
    let capacity: Int
    private var storage: [RecordedDelivery] = []
    /// Where the next delivery goes once the ring is full.
    private var next = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a delivery ring needs room for at least one delivery")
        self.capacity = capacity
    }

    var count: Int { storage.count }

    mutating func append(_ delivery: RecordedDelivery) {
        if storage.count < capacity {
            storage.append(delivery)
        } else {
            storage[next] = delivery
            next = (next + 1) % capacity
        }
    }

    mutating func removeAll() {
        storage = []
        next = 0
    }

    /// Oldest first, those matching every given filter; with `limit`, the newest `limit` of them.
    func deliveries(token: String?, app: String?, since: Int64?, limit: Int?, channel: String? = nil) -> [RecordedDelivery] {
        var matching: [RecordedDelivery] = []
        for offset in 0..<storage.count {
            let delivery = storage[(next + offset) % storage.count]
            if let since, delivery.receivedAt < since { continue }
            if let token, !delivery.matches(token: token) { continue }
            if let app, !delivery.matches(app: app) { continue }
            if let channel, delivery.channel != channel { continue }
            matching.append(delivery)
        }
        if let limit, matching.count > limit {
            return Array(matching.suffix(limit))
        }
        return matching
    }
}
