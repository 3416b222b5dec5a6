public import AMQP
import Foundation
public import PushCore

/// Looking at `push.dead` and sending letters back: shared by `pushctl dead` and the console.
///
/// Looking means taking letters and returning them (``DeadLetterQueue/peek(limit:)`` nacks them back
/// with requeue). On RabbitMQ 4.0–4.2 every return counts as a delivery, and a quorum queue drops a
/// message delivered more often than its limit (20 unless set; `push.dead` has no dead-letter
/// exchange). So `push.dead` is created with a limit no look reaches
/// (``PushCore/PushQueues/deadLetterDeliveryLimit``), and a letter whose count has grown past
/// ``DeadLetterQueue/renewalCount`` — a `push.dead` made before, with the default — is replaced by a
/// fresh copy (count 0) instead of returned. Two lookers at once each see only the letters the other
/// is not holding. A letter is named by its ``key``,
/// a fingerprint of its body, reason and time, stable between one look and the next.
public struct DeadLetter: Sendable, Equatable {
    /// 16 hex digits of FNV-1a over the reason, the AMQP timestamp and the body.
    public let key: String
    public let reason: DeadLetterReason
    /// The queue it died in (RabbitMQ's `x-death`), if RabbitMQ dead-lettered it.
    public let source: String?
    /// Where a replay sends it by default: ``source``, else the work queue its body's kind belongs to
    /// (``inferredQueue(json:queues:)``); nil when neither says.
    public let target: String?
    public let body: [UInt8]
    /// AMQP `timestamp` (seconds since 1970), if any.
    public let timestamp: UInt64?
    /// The app its body names (`app`, as every message of the contract carries it); nil when the body
    /// is not a JSON object with one. Who may read a letter is decided by it.
    public let app: String?

    public init(delivery: AMQPDelivery, queues: PushQueues) {
        reason = DeadLetterReason(headers: delivery.properties.headers)
        source = Self.sourceQueue(delivery.properties.headers)
        body = delivery.body
        timestamp = delivery.properties.timestamp
        let json = try? JSONValue.parse(delivery.body)
        target = source ?? json.flatMap { Self.inferredQueue(json: $0, queues: queues) }
        app = json?["app"]?.stringValue
        key = Self.key(reason: reason.description, timestamp: timestamp, body: delivery.body)
    }

    public static func key(reason: String, timestamp: UInt64?, body: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ bytes: some Sequence<UInt8>) {
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            hash = (hash ^ 0xff) &* 0x0000_0100_0000_01b3
        }
        mix(reason.utf8)
        mix(String(timestamp ?? 0).utf8)
        mix(body)
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The queue a dead letter came from: RabbitMQ's `x-death` (the first entry's queue), if any.
    public static func sourceQueue(_ headers: [String: AMQPFieldValue]) -> String? {
        guard case .array(let deaths)? = headers["x-death"], case .table(let first)? = deaths.first else { return nil }
        return first["queue"]?.stringValue
    }

    /// The work queue a body belongs to, by its shape: a send batch (`batch_id`) → `push.send`, a
    /// feedback event (`reported_at`) → `push.feedback`, a push request (`to`) → `push.requests`, a
    /// registration (`token` with `app`) → `push.registrations`; nil for anything else.
    public static func inferredQueue(json object: JSONValue, queues: PushQueues) -> String? {
        guard case .object = object else { return nil }
        if object["batch_id"] != nil { return queues.send.name }
        if object["reported_at"] != nil { return queues.feedback.name }
        if object["to"] != nil { return queues.requests.name }
        if object["token"] != nil, object["app"] != nil { return queues.registrations.name }
        return nil
    }

    /// The properties a replayed copy carries: the original's without the death headers and the
    /// reason, persistent, stamped `now` (seconds) so its queue's message age starts again.
    public static func replayProperties(_ properties: AMQPProperties, now: UInt64) -> AMQPProperties {
        var properties = properties
        for header in [
            "x-death", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason", "x-last-death-exchange", "x-last-death-queue",
            "x-last-death-reason", PushQueues.errorHeader,
        ] {
            properties.headers[header] = nil
        }
        properties.persistent = true
        properties.timestamp = now
        return properties
    }
}

/// `push.dead` through one broker connection.
public struct DeadLetterQueue: Sendable {
    public let amqp: AMQPConnection
    public let queues: PushQueues

    public init(amqp: AMQPConnection, queues: PushQueues) {
        self.amqp = amqp
        self.queues = queues
    }

    /// How long to wait for the next letter before deciding the queue is drained.
    public static let idleWait: Duration = .milliseconds(500)

    /// Takes up to `limit` letters, unsettled (the caller acks or nacks each).
    public func take(limit: Int, idleWait: Duration = DeadLetterQueue.idleWait) async throws -> [AMQPDelivery] {
        let limit = Swift.max(1, limit)
        let consumer = amqp.consume(queue: queues.dead, prefetch: UInt16(Swift.min(limit, 1000)))
        let collector = Task {
            var taken: [AMQPDelivery] = []
            for try await delivery in consumer {
                taken.append(delivery)
                if taken.count >= limit { break }
            }
            return taken
        }
        // The consumer ends when the limit is reached or nothing more arrives for a while.
        let stopper = Task {
            try? await Task.sleep(for: idleWait + .milliseconds(Swift.min(limit, 10_000)))
            consumer.cancel()
        }
        let taken = try await collector.value
        stopper.cancel()
        consumer.cancel()
        return taken
    }

    /// Up to `limit` letters, left in the queue.
    public func peek(limit: Int) async throws -> [DeadLetter] {
        let deliveries = try await take(limit: limit)
        let letters = deliveries.map { DeadLetter(delivery: $0, queues: queues) }
        for delivery in deliveries { await giveBack(delivery) }
        return letters
    }

    /// A letter delivered this often is given back as a fresh copy: half RabbitMQ 4's default limit
    /// of 20, so a `push.dead` that has the default never reaches it.
    public static let renewalCount = 10

    /// How often a letter has been delivered, as the broker counts it (`x-delivery-count`; RabbitMQ
    /// 4.3 counts returns in `x-acquired-count`).
    static func deliveryCount(_ delivery: AMQPDelivery) -> Int {
        let headers = delivery.properties.headers
        return Int(clamping: max(headers["x-delivery-count"]?.intValue ?? 0, headers["x-acquired-count"]?.intValue ?? 0))
    }

    /// Returns a letter taken for a look: nacked back as it is, or, once delivered
    /// ``renewalCount`` times, published again as a fresh copy (same body and properties, so the
    /// same ``DeadLetter/key``) and the old one acked once the broker confirmed the copy. If the copy
    /// fails the old one is nacked back: nothing is lost either way.
    public func giveBack(_ delivery: AMQPDelivery) async {
        guard Self.deliveryCount(delivery) >= Self.renewalCount else {
            delivery.nack(requeue: true)
            return
        }
        var properties = delivery.properties
        for header in ["x-delivery-count", "x-acquired-count"] { properties.headers[header] = nil }
        do {
            try await amqp.publish(AMQPOutboundMessage(exchange: "", routingKey: queues.dead, body: delivery.body, properties: properties))
            delivery.ack()
        } catch {
            delivery.nack(requeue: true)
        }
    }

    /// What ``replay(key:to:now:)`` did.
    public enum Replayed: Sendable, Equatable {
        case replayed(queue: String)
        /// No letter with that key among the first `searched`.
        case notFound(searched: Int)
        /// The letter names no queue and none was given.
        case noTarget
        /// The letter was found, but the caller may not replay it (its app, if it names one).
        case notPermitted(app: String?)
    }

    /// Sends the letter `key` to `queue` (default: its ``DeadLetter/target``) and removes it from
    /// `push.dead` once the broker confirmed the copy; every other letter taken is returned.
    ///
    /// - Throws: when the broker refused the copy (the letter stays in `push.dead`), or `queue` is not
    ///   a work queue.
    public func replay(
        key: String, to queue: String? = nil, now: UInt64, searchLimit: Int = 1000, permitted: (DeadLetter) -> Bool = { _ in true }
    ) async throws -> Replayed {
        let workQueues = queues.workQueues.map(\.name)
        if let queue, !workQueues.contains(queue) {
            throw DeadLetterReplayError("the target must be a work queue (\(workQueues.joined(separator: ", "))), not \(queue)")
        }
        let deliveries = try await take(limit: searchLimit)
        var result = Replayed.notFound(searched: deliveries.count)
        var failure: (any Error)?
        for delivery in deliveries {
            guard case .notFound = result, failure == nil else {
                await giveBack(delivery)
                continue
            }
            let letter = DeadLetter(delivery: delivery, queues: queues)
            guard letter.key == key else {
                await giveBack(delivery)
                continue
            }
            guard permitted(letter) else {
                await giveBack(delivery)
                result = .notPermitted(app: letter.app)
                continue
            }
            guard let target = queue ?? letter.target else {
                await giveBack(delivery)
                result = .noTarget
                continue
            }
            do {
                try await amqp.publish(
                    AMQPOutboundMessage(
                        exchange: "", routingKey: target, body: delivery.body,
                        properties: DeadLetter.replayProperties(delivery.properties, now: now)))
                delivery.ack()
                result = .replayed(queue: target)
            } catch {
                delivery.nack(requeue: true)
                failure = error
            }
        }
        if let failure { throw failure }
        return result
    }
}

public struct DeadLetterReplayError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
