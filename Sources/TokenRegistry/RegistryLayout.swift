public import PushCore
public import Redis
import Synchronization

/// How one app's registry is spread over Redis: one hash tag (`{<app>}`, the layout every registry
/// had before issue 14, ``legacy``) or ``shards`` virtual shards, each its own hash tag
/// (`{<app>#<n>}`, see ``RedisHashTagSpread``), so one large app uses every master of a Redis Cluster.
///
/// Everything about one device lives in its token's shard: its record, its memberships of the
/// app's, its user's and its topics' sets (each set is kept per shard), its tombstone, and its Live
/// Activity tokens with their sets. So every write stays one Lua script on one slot, and nothing
/// ever has to be kept consistent across two shards. Finding a user's tokens reads the user's set in
/// each shard (``shards`` point reads in one pipeline, no scan of the keyspace); a topic, an
/// activity or `all` scans the shards' sets in parallel.
public struct RegistryLayout: Sendable, Hashable, CustomStringConvertible {
    /// The number of virtual shards; 1 is the single-tag layout.
    public let shards: Int

    /// The registry as it was before sharding: every key under `{<app>}`.
    public static let legacy = RegistryLayout(shards: 1)
    /// The shards a new app's registry gets unless configured otherwise (`PUSH_REGISTRY_SHARDS`):
    /// 24 divides evenly over 1, 2, 3, 4, 6, 8, 12 or 24 masters.
    public static let defaultShards = 24
    /// The most shards a layout may have.
    public static let maximumShards = 1024

    public init(shards: Int) {
        precondition((1...Self.maximumShards).contains(shards), "a registry has 1 to \(Self.maximumShards) shards")
        self.shards = shards
    }

    public var isLegacy: Bool { shards == 1 }

    public var description: String { isLegacy ? "single tag" : "\(shards) shards" }

    /// The shard holding `device`: a stable hash of its hex, the same in every process.
    public func shard(of device: DeviceToken) -> Int {
        RedisHashTagSpread.index(of: device.hex.utf8, count: shards)
    }

    /// The keys of `app`'s shard `shard`.
    public func keys(prefix: String, app: String, shard: Int) -> RegistryKeys {
        RegistryKeys(prefix: prefix, app: app, tag: spread(app: app).tag(shard))
    }

    /// The keys of the shard holding `device`.
    public func keys(prefix: String, app: String, device: DeviceToken) -> RegistryKeys {
        keys(prefix: prefix, app: app, shard: shard(of: device))
    }

    /// The keys of every shard, in shard order.
    public func allKeys(prefix: String, app: String) -> [RegistryKeys] {
        let spread = spread(app: app)
        return spread.tags.map { RegistryKeys(prefix: prefix, app: app, tag: $0) }
    }

    private func spread(app: String) -> RedisHashTagSpread {
        RegistryLayout.spreads.spread(name: app, count: shards)
    }

    /// Spreads are computed once per (app, shards) and kept: building one hashes a few hundred
    /// candidate tags.
    private static let spreads = SpreadCache()
}

/// A small thread-safe memo of ``RedisHashTagSpread``s.
final class SpreadCache: Sendable {
    private let cache = Mutex<[String: RedisHashTagSpread]>([:])

    func spread(name: String, count: Int) -> RedisHashTagSpread {
        let key = "\(count)|\(name)"
        if let found = cache.withLock({ $0[key] }) { return found }
        let spread = RedisHashTagSpread(name: name, count: count)
        cache.withLock { $0[key] = spread }
        return spread
    }
}

/// Where an app's registry is: settled in one layout, or moving from one layout to another
/// (`pushctl registry migrate`). Kept in Redis beside the registry (``RegistryLayouts``).
public enum RegistryState: Sendable, Hashable, CustomStringConvertible {
    case settled(RegistryLayout)
    /// Writes go to `to`, after the device's data is moved there from `from`; reads try `to`
    /// first; scans read `from` wholly before `to`, so a device moved meanwhile is found in one.
    case migrating(from: RegistryLayout, to: RegistryLayout)

    /// Where writes go.
    public var target: RegistryLayout {
        switch self {
        case .settled(let layout): layout
        case .migrating(_, let to): to
        }
    }

    /// The layout data is moving away from, if any.
    public var source: RegistryLayout? {
        if case .migrating(let from, _) = self { return from }
        return nil
    }

    /// Layouts a record may be in, the one to trust first.
    public var readOrder: [RegistryLayout] {
        switch self {
        case .settled(let layout): [layout]
        case .migrating(let from, let to): [to, from]
        }
    }

    /// Layouts a scan goes through, in order: a device moving during the scan leaves `from` before
    /// it enters `to`, so scanning `from` wholly first finds it in one of them.
    public var scanOrder: [RegistryLayout] {
        switch self {
        case .settled(let layout): [layout]
        case .migrating(let from, let to): [from, to]
        }
    }

    public var description: String {
        switch self {
        case .settled(let layout): layout.description
        case .migrating(let from, let to): "migrating from \(from) to \(to)"
        }
    }
}
