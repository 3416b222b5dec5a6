public import AMQP
import Foundation
public import Logging
public import PushCore
public import Redis
import Synchronization

/// Finds the message that crashes its consumer within two crashes, without blaming its neighbours,
/// so one poison message cannot crash-loop a service for the hour the queue's delivery limit takes.
///
/// - Every delivery is marked "in progress" in Redis (owner process, mode) while it is worked on;
///   the mark goes when it is settled.
/// - A process that dies of a crash signal (a Swift trap, a bad access) leaves a note
///   (``CrashRecorder``); one killed (`kill -9`, out of memory) or one whose connection dropped leaves
///   none.
/// - A redelivered message whose mark names a process that left such a note was in progress when that
///   process crashed: a suspect. It is worked on **alone** (``ConsumerLane/alone``: nothing else in
///   this process at the same time), so a second crash can only be its own.
/// - A redelivered message whose mark says it crashed a process while alone is the culprit: it goes
///   to the dead-letter queue with the reason, and its neighbours go on.
///
/// Without Redis the guard steps aside (work goes on unguarded, and the queue's delivery limit is the
/// only net); a warning says so, at most once a minute.
public struct CrashGuard: Sendable {
    /// How long a mark may outlive its owner (a process killed without a note leaves its marks
    /// behind; they harm nothing, since only a note makes a mark count).
    public static let markLifetime: Duration = .seconds(6 * 3600)

    /// The service, for dead letters' reasons: `push-send`.
    public let service: String
    let queue: String
    let redis: any RedisCommandExecutor
    let keyPrefix: String
    let instance: String
    let settler: DeliverySettler
    let amqp: AMQPConnection
    let logger: Logger
    private let claims: Claims

    /// - Parameters:
    ///   - service: names the service in dead letters' reasons (`push-send`).
    ///   - queue: the work queue consumed; its dead letters go where ``DeliverySettler`` sends them.
    public init(
        service: String, queue: WorkQueue, queues: PushQueues, redis: any RedisCommandExecutor, keyPrefix: String, amqp: AMQPConnection,
        logger: Logger,
        instance: String = ProcessInstance.id
    ) {
        self.service = service
        self.queue = queue.name
        self.redis = redis
        self.keyPrefix = keyPrefix
        self.instance = instance
        self.settler = DeliverySettler(queue: queue, queues: queues, subject: "message", gaveUp: "crashed")
        self.amqp = amqp
        self.logger = logger
        self.claims = Claims()
    }

    /// The lanes ``BoundedConsumer`` runs deliveries in.
    public var lanes: ConsumerLanes<AMQPDelivery> {
        ConsumerLanes(
            lane: { await self.lane(for: $0) }, guarding: { deliveries, alone, work in await self.guarding(deliveries, alone: alone, work) })
    }

    // MARK: Keys

    /// `<prefix>:inprogress:<queue>:<fingerprint of the body>`.
    func markKey(_ delivery: AMQPDelivery) -> String {
        "\(keyPrefix):inprogress:\(queue):\(Self.fingerprint(delivery.body))"
    }

    /// 64-bit FNV-1a of the body and its length, in hex: enough to tell the messages of one queue apart.
    static func fingerprint(_ body: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex + "-" + String(body.count)
    }

    // MARK: Lanes

    /// The lane of one delivery. First deliveries go together at once; a redelivery reads its mark.
    func lane(for delivery: AMQPDelivery) async -> ConsumerLane {
        guard delivery.isRedelivery else { return .together }
        let key = markKey(delivery)
        let verdict: CrashVerdict
        let mark: InProgressMark?
        do {
            mark = try await redis.send(["GET", key]).string.flatMap(InProgressMark.init(value:))
            var crash: String?
            if let mark, mark.owner != instance {
                crash = try await redis.send(["GET", CrashRecorder.key(keyPrefix: keyPrefix, instance: mark.owner)]).string
            }
            verdict = CrashVerdict(mark: mark, ownerCrash: crash, instance: instance)
        } catch {
            warnUnguarded(error)
            return .together
        }
        switch verdict {
        case .together:
            return .together
        case .alone(let crash):
            logger.warning(
                "redelivered message was in progress when a process crashed; working on it alone",
                metadata: ["push.crashed_instance": "\(mark?.owner ?? "")", "push.crash": "\(crash)"])
            return .alone
        case .culprit(let crash):
            let reason =
                "crashed \(service) (\(crash)) while it was the only message in progress, after an earlier crash with it in progress: parked so the queue goes on"
            logger.critical(
                "a message crashed the service twice; dead-lettering it", metadata: ["push.error": "\(reason)", "push.queue": "\(queue)"])
            let settled = await settler.settle(delivery, .deadLetter(reason: reason), amqp: amqp, logger: logger)
            if case .settled = settled.outcome, let mark {
                _ = try? await redis.deleteKeys([key], ifValueIs: mark.value)
            }
            return .settled
        }
    }

    /// Marks `deliveries` as in progress (one round trip), runs `work`, and removes the marks again.
    func guarding(_ deliveries: [AMQPDelivery], alone: Bool, _ work: @Sendable () async -> Void) async {
        let mark = InProgressMark(owner: instance, claim: claims.next(), alone: alone)
        let keys = deliveries.map(markKey)
        let lifetime = String(Self.markLifetime.components.seconds)
        do {
            for reply in try await redis.pipeline(keys.map { ["SET", $0, mark.value, "EX", lifetime] }) {
                _ = try reply.throwingServerError()
            }
        } catch {
            warnUnguarded(error)
            await work()
            return
        }
        await work()
        do {
            // One call a mark on a Redis Cluster: marks spread over slots by their bodies (one call for
            // a batch's marks failed there with CROSSSLOT and left them for their lifetime).
            try await redis.deleteKeys(keys, ifValueIs: mark.value)
        } catch {
            // The marks expire; a mark whose owner left no crash note means nothing.
            logger.debug("could not remove in-progress marks", metadata: ["push.error": "\(error)"])
        }
    }

    private func warnUnguarded(_ error: any Error) {
        if claims.shouldWarn(now: monotonicSeconds()) {
            logger.warning(
                "in-progress marks unavailable: working without the crash guard (the queue's delivery limit still parks a message that keeps crashing the service)",
                metadata: ["push.error": "\(error)"])
        }
    }

    private func monotonicSeconds() -> Int64 {
        Int64(ProcessInfo.processInfo.systemUptime)
    }

    /// Claim numbers (never reused in the process) and the last unguarded warning.
    private final class Claims: Sendable {
        private let counter = Atomic<UInt64>(0)
        private let lastWarning = Atomic<Int64>(Int64.min)

        func next() -> UInt64 { counter.add(1, ordering: .relaxed).newValue }

        func shouldWarn(now: Int64) -> Bool {
            let last = lastWarning.load(ordering: .relaxed)
            guard last == Int64.min || now - last >= 60 else { return false }
            return lastWarning.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged
        }
    }
}

/// What an "in progress" mark holds: `<mode> <claim> <owner instance>`, mode `a` (alone) or `t`.
struct InProgressMark: Sendable, Equatable {
    var owner: String
    var claim: UInt64
    var alone: Bool

    init(owner: String, claim: UInt64, alone: Bool) {
        self.owner = owner
        self.claim = claim
        self.alone = alone
    }

    init?(value: String) {
        let parts = value.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "a" || parts[0] == "t", let claim = UInt64(parts[1]), !parts[2].isEmpty else { return nil }
        self.init(owner: String(parts[2]), claim: claim, alone: parts[0] == "a")
    }

    var value: String { "\(alone ? "a" : "t") \(claim) \(owner)" }
}

/// What a redelivered message's mark says about it (pure; ``CrashGuard`` reads the mark and the note).
enum CrashVerdict: Equatable {
    /// No crash to blame it for: worked on with the others.
    case together
    /// In progress with others when its process crashed (`crash` is the note): worked on alone.
    case alone(crash: String)
    /// Crashed a process while alone: the culprit.
    case culprit(crash: String)

    /// - Parameters:
    ///   - mark: the message's in-progress mark, if any.
    ///   - ownerCrash: the crash note of the mark's owner, if it left one.
    ///   - instance: this process.
    init(mark: InProgressMark?, ownerCrash: String?, instance: String) {
        guard let mark, mark.owner != instance, let crash = ownerCrash else {
            self = .together
            return
        }
        self = mark.alone ? .culprit(crash: crash) : .alone(crash: crash)
    }
}

/// One process, for in-progress marks and crash notes: `<host>/<pid>/<random>`, never reused.
public enum ProcessInstance {
    public static let id =
        "\(ProcessInfo.processInfo.hostName)/\(ProcessInfo.processInfo.processIdentifier)/\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
}
