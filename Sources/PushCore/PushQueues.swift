/// The names of the RabbitMQ objects every service shares (CONTRACT.md, "RabbitMQ topology").
///
/// Pure data: the AMQP wiring that declares them lives in the service kit. ``standard`` is the
/// contract's `push` namespace; another prefix gives a separate, identically shaped set (tests use
/// one each so they never see each other's messages).
public struct PushQueues: Sendable, Hashable {
    /// The contract's names: exchange `push`, queues `push.requests`, `push.send`, ….
    public static let standard = PushQueues()

    /// The first part of every name; `push` in the contract.
    public let prefix: String

    public init(prefix: String = "push") {
        self.prefix = prefix
    }

    /// Whether `prefix` can name the queues and exchanges: non-empty ASCII letters, digits, `.`, `-`
    /// and `_` (what a RabbitMQ name may hold without quoting in tools and policies).
    public static func isValidPrefix(_ prefix: String) -> Bool {
        !prefix.isEmpty
            && prefix.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || ".-_".unicodeScalars.contains($0))
            }
    }

    /// Direct exchange for work: requests, registrations, send batches, feedback, dead letters.
    public var exchange: String { prefix }
    /// Topic exchange for outcome events (`delivered`, `failed.<Reason>`, `token.removed`).
    public var eventsExchange: String { "\(prefix).events" }

    public var requests: WorkQueue {
        WorkQueue(name: "\(prefix).requests", routingKey: "request", retryTiers: [.seconds(5), .seconds(60), .seconds(600)])
    }
    public var registrations: WorkQueue {
        WorkQueue(name: "\(prefix).registrations", routingKey: "registration", retryTiers: [.seconds(5), .seconds(60), .seconds(600)])
    }
    /// Send batches; its tiers grow from 1 s so a lost connection costs little, up to 15 min, the
    /// wait Apple asks for before a notification APNs answered with a 5xx is tried again.
    public var send: WorkQueue {
        WorkQueue(
            name: "\(prefix).send", routingKey: "send",
            retryTiers: [.seconds(1), .seconds(5), .seconds(30), .seconds(120), .seconds(600), .seconds(900)])
    }
    public var feedback: WorkQueue {
        WorkQueue(name: "\(prefix).feedback", routingKey: "feedback", retryTiers: [.seconds(5), .seconds(60), .seconds(600)])
    }

    /// Every work queue, in declaration order.
    public var workQueues: [WorkQueue] { [requests, registrations, send, feedback] }

    /// Where anything rejected ends, with the reason in the ``errorHeader`` header.
    public var dead: String { "\(prefix).dead" }
    /// The routing key of ``dead`` on ``exchange``; also the work queues' dead-letter routing key.
    public let deadRoutingKey = "dead"

    /// Every queue name: work queues, their retry tiers, and the dead-letter queue.
    public var allQueueNames: [String] {
        workQueues.flatMap { [$0.name] + $0.retryQueues.map(\.name) } + [dead]
    }

    /// The header that carries why a message was dead-lettered.
    public static let errorHeader = "x-push-error"

    /// How many times a quorum work queue redelivers one message (consumer crashes, requeues) before
    /// dead-lettering it, so one poison message cannot loop forever.
    public static let deliveryLimit = 20

    /// `push.dead`'s delivery limit: the largest RabbitMQ takes (a 32-bit signed integer), so looking
    /// at the letters never drops one.
    public static let deadLetterDeliveryLimit = Int(Int32.max)
}

/// A durable quorum work queue bound to ``PushQueues/exchange``, with its delayed-retry tiers.
public struct WorkQueue: Sendable, Hashable {
    public let name: String
    public let routingKey: String
    /// Delays of the retry tiers, shortest first. A message published to a tier's queue waits there for
    /// the tier's delay (queue TTL) and is then dead-lettered back to this work queue.
    public let retryTiers: [Duration]

    public init(name: String, routingKey: String, retryTiers: [Duration]) {
        self.name = name
        self.routingKey = routingKey
        self.retryTiers = retryTiers
    }

    /// The queue of retry tier `index` (0-based), e.g. `push.send.retry.5s`.
    public func retryQueue(tier index: Int) -> String {
        "\(name).retry.\(Self.label(retryTiers[index]))"
    }

    /// The retry queue for a message that went through `retries` tiers already, or nil when it
    /// should be dead-lettered: `maximum` retries are used up, or `retries` is negative (the count
    /// comes from a header anyone could set). Past the last tier it stays on the last (longest) one.
    ///
    /// - Parameter atLeast: The shortest wait the retry's cause allows (APNs' 5xx and 429 ask for a
    ///   delay); the tier is the longer of the count's tier and the shortest one covering this.
    public func retryQueue(afterRetries retries: Int, maximum: Int, atLeast: Duration = .zero) -> String? {
        guard retries >= 0, retries < maximum, !retryTiers.isEmpty else { return nil }
        return retryQueue(tier: Self.tier(afterRetries: retries, atLeast: atLeast, in: retryTiers))
    }

    /// The tier (index into `tiers`, shortest first, not empty) of a message that went through
    /// `retries` tiers already: the tiers climb with the count and stay on the last, and never go
    /// below the shortest tier at least `atLeast` long (the last tier when none is).
    public static func tier(afterRetries retries: Int, atLeast: Duration, in tiers: [Duration]) -> Int {
        let climbed = Swift.min(Swift.max(0, retries), tiers.count - 1)
        guard atLeast > .zero else { return climbed }
        let floor = tiers.firstIndex { $0 >= atLeast } ?? tiers.count - 1
        return Swift.max(climbed, floor)
    }

    /// All retry queue names with their delays, shortest first.
    public var retryQueues: [(name: String, delay: Duration)] {
        retryTiers.indices.map { (retryQueue(tier: $0), retryTiers[$0]) }
    }

    /// `1s`, `30s`, `2m`, `10m`, `1h`: whole units only, so names stay short and stable.
    static func label(_ delay: Duration) -> String {
        let milliseconds = delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000
        if milliseconds % 3_600_000 == 0 { return "\(milliseconds / 3_600_000)h" }
        if milliseconds % 60_000 == 0 { return "\(milliseconds / 60_000)m" }
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000)s" }
        return "\(milliseconds)ms"
    }
}
