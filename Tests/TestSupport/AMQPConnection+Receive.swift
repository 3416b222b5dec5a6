import AMQP

extension AMQPConnection {
    /// Takes `count` messages off `queue` (acking each unless `ack` is false), or throws once
    /// `timeout` passes first. The consumer is cancelled either way.
    public func receive(from queue: String, count: Int, timeout: Duration, ack: Bool = true) async throws -> [AMQPDelivery] {
        guard count > 0 else { return [] }
        let consumer = consume(queue: queue, prefetch: UInt16(min(count, 1000)))
        defer { consumer.cancel() }
        return try await withThrowingTaskGroup(of: [AMQPDelivery]?.self) { group in
            group.addTask {
                var deliveries: [AMQPDelivery] = []
                for try await delivery in consumer {
                    if ack { delivery.ack() }
                    deliveries.append(delivery)
                    if deliveries.count == count { break }
                }
                return deliveries
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            guard let deliveries = first else {
                throw ChildProcessError("fewer than \(count) messages arrived in \(queue) within \(timeout)")
            }
            return deliveries
        }
    }
}
