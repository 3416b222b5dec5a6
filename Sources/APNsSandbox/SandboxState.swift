import Synchronization

/// Everything the admin API reads and changes, shared by the worker threads: token states, faults,
/// recorded deliveries and counts. Thread-safe.
///
/// Workers read token states and faults through a copy they refresh only when ``generation`` moved
/// (one atomic load per event-loop pass); deliveries and counts arrive in one batch per pass.
public final class SandboxState: Sendable {
    /// Default number of deliveries kept.
    public static let defaultRecordLimit = 200_000

    private struct Storage: Sendable {
        var rules = SandboxRules()
        var ring: DeliveryRing
        var statistics = SandboxStatistics()
        /// Nil unless duplicate tracking is on.
        var distinct: DistinctDeliveries?
        /// Seed for the workers' fault rolls; nil seeds from the system.
        var faultSeed: UInt64?
    }

    private let storage: Mutex<Storage>
    private let changes = Atomic<UInt64>(0)
    /// The broadcast channels the management API made (`GET /channels`).
    public let channels: ChannelRegistry

    /// - Parameters:
    ///   - recordLimit: Deliveries kept for `GET /deliveries` (the oldest go first); counts stay exact.
    ///   - faultSeed: Seeds the fault rolls (worker `i` uses `seed + i`), for reproducible tests.
    ///   - trackDuplicates: Remember every accepted (topic, token) pair so `/stats` counts distinct
    ///     deliveries and duplicates exactly, whatever the record limit (16 bytes a pair).
    ///   - channelLimit: Broadcast channels per bundle id (Apple: 10,000 per app and environment).
    public init(
        recordLimit: Int = SandboxState.defaultRecordLimit, faultSeed: UInt64? = nil, trackDuplicates: Bool = false,
        channelLimit: Int = ChannelRegistry.defaultLimit
    ) {
        channels = ChannelRegistry(limit: channelLimit)
        storage = Mutex(
            Storage(ring: DeliveryRing(capacity: max(1, recordLimit)), distinct: trackDuplicates ? DistinctDeliveries() : nil, faultSeed: faultSeed)
        )
    }

    /// Moves whenever token states or faults change.
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    var faultSeed: UInt64? { storage.withLock { $0.faultSeed } }

    /// The current rules and the generation they belong to.
    func rules() -> (rules: SandboxRules, generation: UInt64) {
        storage.withLock { storage in (storage.rules, changes.load(ordering: .acquiring)) }
    }

    private func changeRules(_ body: (inout SandboxRules) -> Void) -> SandboxRules {
        storage.withLock { storage in
            body(&storage.rules)
            changes.add(1, ordering: .releasing)
            return storage.rules
        }
    }

    // MARK: Tokens

    /// Sets the state of a (lowercase hex) token; nil makes it a plain, deliverable token again.
    public func setState(_ state: TokenState?, forToken token: String) {
        _ = changeRules { $0.tokenStates[token.lowercased()] = state }
    }

    public func state(ofToken token: String) -> TokenState? {
        storage.withLock { $0.rules.tokenStates[token.lowercased()] }
    }

    // MARK: Faults

    public var faults: SandboxFaults { storage.withLock { $0.rules.faults } }

    /// Changes the faults; returns them as they are now.
    @discardableResult
    public func updateFaults(_ body: (inout SandboxFaults) -> Void) -> SandboxFaults {
        changeRules { body(&$0.faults) }.faults
    }

    public func clearFaults() {
        _ = changeRules { $0.faults = SandboxFaults() }
    }

    // MARK: Deliveries and counts

    /// Recorded deliveries, oldest first, filtered (see `GET /deliveries`); `channel` keeps the
    /// broadcasts on that channel.
    public func deliveries(
        token: String? = nil, app: String? = nil, since: Int64? = nil, limit: Int? = nil, channel: String? = nil
    ) -> [RecordedDelivery] {
        storage.withLock { $0.ring.deliveries(token: token?.lowercased(), app: app, since: since, limit: limit, channel: channel) }
    }

    /// Forgets the recorded deliveries (counts stay); returns how many there were.
    @discardableResult
    public func removeDeliveries() -> Int {
        storage.withLock { storage in
            let count = storage.ring.count
            storage.ring.removeAll()
            return count
        }
    }

    public var statistics: SandboxStatistics {
        storage.withLock { storage in
            var statistics = storage.statistics
            statistics.recorded = storage.ring.count
            statistics.distinctDelivered = storage.distinct?.distinct
            statistics.duplicates = storage.distinct?.duplicates
            return statistics
        }
    }

    func commit(_ batch: WorkerBatch) {
        storage.withLock { storage in
            for delivery in batch.deliveries { storage.ring.append(delivery) }
            if storage.distinct != nil {
                // Broadcasts have no token: several on one channel are not duplicates.
                for delivery in batch.deliveries where delivery.channel == nil { storage.distinct!.record(delivery) }
            }
            storage.statistics.requests += batch.requests
            for (status, count) in batch.byStatus { storage.statistics.byStatus[status, default: 0] += count }
            for (reason, count) in batch.byReason { storage.statistics.byReason[reason, default: 0] += count }
            storage.statistics.connections += batch.connections
            storage.statistics.goaways += batch.goaways
            storage.statistics.droppedConnections += batch.droppedConnections
            storage.statistics.abortedConnections += batch.abortedConnections
            storage.statistics.lostAnswers += batch.lostAnswers
            storage.statistics.channelRequests += batch.channelRequests
            for (status, count) in batch.channelByStatus { storage.statistics.channelByStatus[status, default: 0] += count }
            for (reason, count) in batch.channelByReason { storage.statistics.channelByReason[reason, default: 0] += count }
        }
    }
}
